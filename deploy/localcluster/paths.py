"""Where the local control plane's binaries, templates and per-run state live.

The binaries sit in a versioned cache outside the repo (built by deploy/localcluster/build.sh);
run state (PKI, etcd data, logs, kubeconfig) sits under a run dir that is gitignored, never in
~/.kube or ~/.kwok, so a test run cannot disturb the developer's own clusters.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DIR = REPO_ROOT / "deploy" / "localcluster"
BUILD_SCRIPT = DEPLOY_DIR / "build.sh"
BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "etcd",
    "kwok",
    "kwokctl",
    "kubectl",
)


@dataclass(frozen=True)
class Versions:
    """The version set; kept in step with the defaults in build.sh (same env overrides)."""

    kube: str = os.environ.get("K8S_VERSION", "1.36.3")
    etcd: str = os.environ.get("ETCD_VERSION", "3.6.8")
    kwok: str = os.environ.get("KWOK_VERSION", "0.8.0")


class BinariesMissingError(RuntimeError):
    """The versioned cache lacks a binary; `make cluster-build` fills it."""


def bin_dir(versions: Versions | None = None) -> Path:
    v = versions or Versions()
    root = Path(os.environ.get("GPUPORTAL_CACHE", Path.home() / ".cache" / "gpuportal"))
    return root / f"k8s-{v.kube}-etcd-{v.etcd}-kwok-{v.kwok}" / "bin"


def run_dir() -> Path:
    return Path(os.environ.get("GPUPORTAL_RUN_DIR", REPO_ROOT / ".run")).resolve()


def missing_binaries(directory: Path | None = None) -> list[str]:
    d = directory or bin_dir()
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


def require_binaries(directory: Path | None = None) -> Path:
    """Return the bin dir, or raise naming what is missing and how to build it."""
    d = directory or bin_dir()
    missing = missing_binaries(d)
    if missing:
        raise BinariesMissingError(
            f"missing {', '.join(missing)} in {d}; run `make cluster-build` "
            "(a cold build takes tens of minutes on 2 cores, a cached one seconds)"
        )
    return d


def build(*, quiet: bool = False) -> Path:
    """Run build.sh (a no-op taking seconds when the cache is complete) and return the bin dir."""
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])
