"""ansible-lint (production profile) with no findings, ansible-playbook --syntax-check of every playbook
against each example site's rendered inventory, shellcheck of cluster.sh."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cluster_setup.ansible import CLUSTER, EXAMPLES, PLAYBOOKS, run, sitefile, tool

SITES = sorted(EXAMPLES.glob("*.yaml"))


def test_there_are_playbooks_and_example_sites() -> None:
    names = {p.stem for p in PLAYBOOKS}
    steps = {
        "preflight",
        "prepare",
        "kube-packages",
        "control-plane",
        "join",
        "cni",
        "gpu",
        "storage",
        "portal",
    }
    assert steps | {"site", "add-node", "remove-node", "upgrade"} <= names
    assert len(SITES) >= 2


def test_ansible_lint_has_no_findings() -> None:
    out = run(
        [tool("ansible-lint"), "--offline", "--profile", "production", "playbooks", "roles"], timeout=300
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "0 failure(s), 0 warning(s)" in text, text


@pytest.mark.parametrize("site", SITES, ids=[s.stem for s in SITES])
def test_every_playbook_passes_the_syntax_check(site: Path, tmp_path: Path) -> None:
    sitefile.render(sitefile.load(site), tmp_path)
    # One ansible-playbook for all of them (it checks each playbook given and names the one that
    # fails); a process per playbook spent about 1 s each starting Ansible.
    inventory = str(tmp_path / "inventory.yml")
    out = run([tool("ansible-playbook"), "-i", inventory, "--syntax-check", *map(str, PLAYBOOKS)])
    assert out.returncode == 0, f"{out.stdout}{out.stderr}"


def test_shellcheck_is_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is missing: run deploy/setup/system-deps.sh")
    out = run([shellcheck, str(CLUSTER / "cluster.sh")])
    assert out.returncode == 0, out.stdout


def test_ansible_finds_the_chroot_connection() -> None:
    out = run([tool("ansible-doc"), "-t", "connection", "chroot"])
    assert out.returncode == 0, out.stderr
    assert "root directory" in out.stdout, out.stdout
