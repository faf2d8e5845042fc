"""Renders deploy/localcluster/kwokctl.yaml plus the stage files into one kwokctl config.

kwokctl needs absolute binary paths (relative ones are resolved against its own workdir, and a
missing one is downloaded), so the committed file is a template filled in per run.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from deploy.localcluster.paths import DEPLOY_DIR, Versions

# Order matters only for readability; kwok matches stages by selector.
STAGE_FILES = (
    "node-initialize.yaml",
    "node-heartbeat-with-lease.yaml",
    "pod-ready.yaml",
    "pod-complete.yaml",
    "pod-fail.yaml",
    "pod-delete.yaml",
)
DEFAULT_LOGS_FILE = DEPLOY_DIR / "sample.log"


def render_config(
    *, bin_dir: Path, pki_dir: Path, logs_file: Path = DEFAULT_LOGS_FILE, versions: Versions | None = None
) -> str:
    template = Template((DEPLOY_DIR / "kwokctl.yaml").read_text())
    head = template.substitute(
        BIN=str(bin_dir.resolve()),
        PKI=str(pki_dir.resolve()),
        LOGS_FILE=str(logs_file.resolve()),
        KUBE_VERSION=(versions or Versions()).kube,
    )
    stages = [(DEPLOY_DIR / "stages" / name).read_text() for name in STAGE_FILES]
    return "\n---\n".join([head.rstrip(), *(s.rstrip() for s in stages)]) + "\n"


def write_config(path: Path, *, bin_dir: Path, pki_dir: Path, logs_file: Path = DEFAULT_LOGS_FILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_config(bin_dir=bin_dir, pki_dir=pki_dir, logs_file=logs_file))
    return path
