"""Running the cluster setup's Ansible (deploy/cluster/automation) from the tests, with the venv's tools."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from deploy.cluster import sitefile

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "deploy" / "cluster"
ANSIBLE = CLUSTER / "automation"
PLAYBOOKS = sorted((ANSIBLE / "playbooks").glob("*.yml"))
EXAMPLES = CLUSTER / "examples"
VENV_BIN = Path(sys.executable).parent

__all__ = ["sitefile"]


def tool(name: str) -> str:
    path = VENV_BIN / name
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: run `make venv` (ansible-core and ansible-lint are dev dependencies)"
        )
    return str(path)


def env(**extra: str) -> dict[str, str]:
    return {
        "PATH": f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": "/tmp/gpuportal-ansible-local",
        "ANSIBLE_NOCOLOR": "1",
        **extra,
    }


def run(args: list[str], timeout: int = 600, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, cwd=ANSIBLE, env=env(**extra), check=False
    )


RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@dataclass
class PlaybookRun:
    """ansible-playbook's output (default callback): its PLAY RECAP per host and the changed tasks."""

    output: str
    stats: dict[str, dict[str, int]]
    changed: list[str]


def playbook(args: list[str], timeout: int = 600) -> PlaybookRun:
    """Run ansible-playbook (args start with it or a wrapper); fail the test with its output if it failed."""
    out = run(args, timeout=timeout)
    text = out.stdout + out.stderr
    stats = {
        m[1]: {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}
        for m in RECAP.finditer(out.stdout)
    }
    if out.returncode != 0 or not stats:
        pytest.fail(f"ansible-playbook failed (rc {out.returncode}):\n{text[-8000:]}", pytrace=False)
    changed, task = [], ""
    for line in out.stdout.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            task = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif line.startswith("changed: "):
            changed.append(task)
    return PlaybookRun(text, stats, changed)
