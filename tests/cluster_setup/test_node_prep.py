"""A real run of node preparation (deploy/cluster/automation/playbooks/prepare.yml) against a Debian bookworm
root filesystem built here (tests/cluster_setup/rootfs.py, cached), through the chroot connection; then a
second run that must change nothing. Live kernel and service steps are off (host_live false): a chroot
shares this machine's kernel."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.cluster_setup import rootfs
from tests.cluster_setup.ansible import ANSIBLE, EXAMPLES, PlaybookRun, playbook, sitefile, tool

SITE = EXAMPLES / "lab-1cp-3gpu.yaml"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        pytest.fail("node preparation in a chroot needs root (mmdebstrap, chroot, mount)")
    return rootfs.fresh(tmp_path_factory.mktemp("nodeprep"))


@pytest.fixture(scope="module")
def inventory(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example site's inventory, its first worker being the root filesystem."""
    site = sitefile.load(SITE)
    inv = sitefile.inventory(site)
    host = {
        "ansible_host": str(root),
        "ansible_connection": "chroot",
        "ansible_become": False,
        "node_address": "192.168.110.111",
        "node_interface": "ens1f0",
        "node_gpus": 4,
    }
    inv["all"]["vars"]["host_live"] = False
    inv["all"]["children"] = {"workers": {"hosts": {"gpu1": host}}, "gpu_nodes": {"hosts": {"gpu1": {}}}}
    path = tmp_path_factory.mktemp("inv") / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def prepare(root: Path, inventory: Path) -> tuple[PlaybookRun, float]:
    """One run, in a private mount namespace holding the chroot's /proc and /dev (gone when it exits)."""
    argv = [tool("ansible-playbook"), "-i", str(inventory), str(ANSIBLE / "playbooks" / "prepare.yml")]
    script = f"mount -t proc proc {root}/proc && mount --rbind /dev {root}/dev && exec {shlex.join(argv)}"
    started = time.monotonic()
    result = playbook(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], timeout=900)
    return result, time.monotonic() - started


@pytest.fixture(scope="module")
def runs(root: Path, inventory: Path) -> list[tuple[PlaybookRun, float]]:
    first = prepare(root, inventory)
    second = prepare(root, inventory)
    return [first, second]


def dpkg_installed(root: Path) -> set[str]:
    out = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}


def test_the_first_run_installs_and_configures_the_node(
    root: Path, runs: list[tuple[PlaybookRun, float]]
) -> None:
    result, seconds = runs[0]
    stats = result.stats["gpu1"]
    assert stats["failed"] == 0, stats
    assert stats["unreachable"] == 0, stats
    assert stats["changed"] > 0, "a fresh Debian root must need preparing"
    installed = dpkg_installed(root)
    assert set(rootfs.node_packages()) <= installed, set(rootfs.node_packages()) - installed
    version = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Version}", "containerd"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert version == sitefile.load(SITE).data["containerd"]["version"]
    etc = root / "etc"
    assert (etc / "modules-load.d" / "kubernetes.conf").read_text().split() == ["overlay", "br_netfilter"]
    sysctl = (etc / "sysctl.d" / "99-kubernetes.conf").read_text()
    for line in (
        "net.ipv4.ip_forward = 1",
        "net.bridge.bridge-nf-call-iptables = 1",
        "net.bridge.bridge-nf-call-ip6tables = 1",
    ):
        assert line in sysctl
    fstab = (etc / "fstab").read_text()
    assert "# off for the kubelet: /swap.img none swap sw 0 0" in fstab
    assert not [ln for ln in fstab.splitlines() if " swap " in ln and not ln.startswith("#")]
    config = (etc / "containerd" / "config.toml").read_text()
    assert "SystemdCgroup = true" in config
    assert 'config_path = "/etc/containerd/certs.d"' in config
    assert 'sandbox_image = "registry.k8s.io/pause:3.10"' in config
    # a GPU node: the NVIDIA runtime is containerd's default (gpu.yml installs the toolkit it names)
    assert 'default_runtime_name = "nvidia"' in config
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in config
    reg = etc / "containerd" / "certs.d" / "harbor.lab.example:30003"
    ca = (EXAMPLES / "registry-ca.pem").read_text()
    assert (reg / "ca.crt").read_text() == ca
    assert 'server = "https://harbor.lab.example:30003"' in (reg / "hosts.toml").read_text()
    mirror = (etc / "containerd" / "certs.d" / "docker.io" / "hosts.toml").read_text()
    assert 'server = "https://registry-1.docker.io"' in mirror
    assert '[host."https://harbor.lab.example:30003/v2/docker.io"]' in mirror
    # the system trust store holds the registry CA (update-ca-certificates ran in the root)
    assert ca.strip().splitlines()[1] in (etc / "ssl" / "certs" / "ca-certificates.crt").read_text()
    sources = (etc / "chrony" / "sources.d" / "site.sources").read_text()
    assert "server 0.debian.pool.ntp.org iburst" in sources
    for unit in ("containerd", "chrony"):
        link = etc / "systemd" / "system" / "multi-user.target.wants" / f"{unit}.service"
        assert link.is_symlink()
        assert link.readlink() == Path(f"/lib/systemd/system/{unit}.service")
        assert (root / "lib" / "systemd" / "system" / f"{unit}.service").is_file()  # inside the root
    assert seconds < 300, f"the first run took {seconds:.0f} s"


def test_a_second_run_changes_nothing(runs: list[tuple[PlaybookRun, float]]) -> None:
    result, _ = runs[1]
    stats = result.stats["gpu1"]
    assert stats["failed"] == 0, stats
    assert stats["changed"] == 0, f"changed on the second run: {result.changed}\n{result.output[-6000:]}"
    assert stats["ok"] > 10
