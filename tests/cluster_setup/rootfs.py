"""A Debian bookworm root filesystem for the node-preparation run, built once with mmdebstrap and cached.

It stands in for a freshly installed Debian 12 server: systemd, Python (Ansible's modules run on the
target), a swap line in /etc/fstab. The packages node preparation installs are downloaded into its apt
cache when the tarball is built, so a run installs them without a download; the install itself is the
playbook's. The tarball lives under ~/.cache/gpuportal/cluster-rootfs/, keyed on this recipe and the
role's package list; a test extracts a fresh copy each session.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE_VARS = REPO / "deploy" / "cluster" / "automation" / "roles" / "node_prep" / "vars" / "main.yml"
CACHE = Path(os.environ.get("GPUPORTAL_CACHE", Path.home() / ".cache" / "gpuportal")) / "cluster-rootfs"
MIRROR = os.environ.get("GPUPORTAL_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY = os.environ.get("GPUPORTAL_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
# What a Debian 12 server install has that the playbook relies on (Python for the modules).
BASE = ["systemd", "systemd-sysv", "dbus", "python3", "python3-apt", "iproute2", "ca-certificates"]
RECIPE = 1  # bump when the hooks below change


def node_packages() -> list[str]:
    data = yaml.safe_load(ROLE_VARS.read_text())
    packages: list[str] = data["node_prep_packages"]
    return packages


def tarball() -> Path:
    key = hashlib.sha256(repr((RECIPE, BASE, node_packages(), MIRROR)).encode()).hexdigest()[:16]
    return CACHE / f"bookworm-{key}.tar"


def build(log: Path) -> Path:
    """The cached tarball, built first when missing (about 2 minutes, root needed)."""
    target = tarball()
    if target.is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial.tar")
    hooks = [
        # A swap entry as a server install leaves it; node preparation must turn it off.
        'echo "/swap.img none swap sw 0 0" >> "$1/etc/fstab"',
        'echo node-under-test > "$1/etc/hostname"',
        f'chroot "$1" apt-get install -y -qq --download-only {" ".join(node_packages())}',
    ]
    cmd = [
        "mmdebstrap",
        "--quiet",
        "--variant=minbase",
        "--include=" + ",".join(BASE),
        '--aptopt=APT::Install-Recommends "false"',
        "--skip=cleanup/apt/lists",
        "--skip=cleanup/apt/cache",
        *[f"--customize-hook={hook}" for hook in hooks],
        "bookworm",
        str(partial),
        f"deb {MIRROR} bookworm main",
        f"deb {MIRROR} bookworm-updates main",
        f"deb {SECURITY} bookworm-security main",
    ]
    with log.open("w") as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=True, timeout=1200)
    partial.rename(target)
    return target


def extract(tar: Path, root: Path) -> None:
    root.mkdir(parents=True)
    subprocess.run(["tar", "-xf", str(tar), "-C", str(root), "--numeric-owner"], check=True, timeout=300)
    # Name resolution for the apt step, as the host has it.
    (root / "etc" / "resolv.conf").write_text(Path("/etc/resolv.conf").read_text())


def fresh(work: Path) -> Path:
    """A new root filesystem under `work` from the cached tarball (built first when missing)."""
    extract(build(work / "mmdebstrap.log"), work / "root")
    return work / "root"


if __name__ == "__main__":
    print(build(Path("/tmp/cluster-rootfs.log")))
