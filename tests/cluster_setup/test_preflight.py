"""A real run of the pre-flight check (deploy/cluster/automation/playbooks/preflight.yml) against a
fresh Debian bookworm root filesystem through the chroot connection: on a host that differs from its
site file it fails with one line naming each problem, on a host that matches it says ready, and
neither run changes a file of the host.

Each run is in private mount and UTS namespaces: the chroot's /proc, and a hostname of its own (a
chroot shares this machine's kernel, network and hostname, so the interface is this machine's
loopback)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster_setup import rootfs
from tests.cluster_setup.ansible import ANSIBLE, EXAMPLES, run, sitefile, tool

SITE = EXAMPLES / "lab-1cp-3gpu.yaml"
# What Ansible itself leaves in a managed host: its remote temporary folder (and `skipped` leaves out
# Python's caches).
ANSIBLE_OWN = ("root/.ansible", "tmp")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        pytest.fail("the pre-flight run in a chroot needs root (chroot, mount, unshare)")
    return rootfs.fresh(tmp_path_factory.mktemp("preflight"))


def inventory(root: Path, workdir: Path, *, gpu: bool, interface: str, address: str) -> Path:
    inv: dict[str, Any] = sitefile.inventory(sitefile.load(SITE))
    host = {
        "ansible_host": str(root),
        "ansible_connection": "chroot",
        "ansible_become": False,
        "node_address": address,
        "node_interface": interface,
        "node_gpus": 4,
    }
    inv["all"]["children"] = {
        "workers": {"hosts": {"gpu1": host}},
        "gpu_nodes": {"hosts": {"gpu1": {}} if gpu else {}},
        "control_plane": {"hosts": {}},
    }
    path = workdir / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def preflight(root: Path, inv: Path, hostname: str) -> str:
    """ansible-playbook preflight.yml; its whole output, the exit status first."""
    argv = [tool("ansible-playbook"), "-i", str(inv), str(ANSIBLE / "playbooks" / "preflight.yml")]
    script = f"hostname {hostname} && mount -t proc proc {root}/proc && exec {shlex.join(argv)}"
    out = run(["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script], timeout=300)
    return f"rc={out.returncode}\n{out.stdout}{out.stderr}"


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path of the root filesystem with its mode, and a file's size and modification time (a
    folder's own time moves when Ansible makes its temporary folder; what it holds is listed)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not skipped((here / d).relative_to(root))]
        for name in dirnames + filenames:
            st = (here / name).lstat()
            kept = (0, 0) if stat.S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns)
            found[str((here / name).relative_to(root))] = (st.st_mode, *kept)
    return found


def skipped(rel: Path) -> bool:
    return str(rel) in ("proc", "dev", *ANSIBLE_OWN) or rel.name == "__pycache__"


def test_a_host_unlike_its_site_file_fails_with_each_problem_named(root: Path, tmp_path: Path) -> None:
    before = tree(root)
    inv = inventory(root, tmp_path, gpu=True, interface="ens1f0", address="192.168.110.111")
    out = preflight(root, inv, hostname="node-under-test")
    assert out.startswith("rc=2\n"), out[-4000:]
    report = " ".join(out.split())  # the message is one line, folded by the output
    for problem in (
        "gpu1: hostname is node-under-test, the site file says gpu1",
        "no interface ens1f0",
        "no NVIDIA driver (nvidia-smi failed): install it first",
    ):
        assert problem in report, report
    assert tree(root) == before, "the pre-flight check changed the host"


def test_a_host_like_its_site_file_is_ready_and_unchanged(root: Path, tmp_path: Path) -> None:
    before = tree(root)
    inv = inventory(root, tmp_path, gpu=False, interface="lo", address="127.0.0.1")
    out = preflight(root, inv, hostname="gpu1")
    assert out.startswith("rc=0\n"), out[-4000:]
    assert "gpu1: ready" in out, out[-4000:]
    assert "changed=0" in out, out[-4000:]
    assert tree(root) == before, "the pre-flight check changed the host"
    assert len(Path("/proc/swaps").read_text().splitlines()) == 1, (
        "this machine has swap on: the ready case cannot hold here"
    )
