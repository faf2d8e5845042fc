"""Renders deploy/localcluster/kwokctl.yaml plus the stage files into one kwokctl config.

kwokctl needs absolute binary paths (relative ones are resolved against its own workdir, and a
missing one is downloaded), so the committed file is a template filled in per run.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

import yaml

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
    # Imported here: `python -m deploy.localcluster.netns` imports this package first, and runpy
    # warns when the module it runs was imported before it.
    from deploy.localcluster import netns

    if netns.current() is not None:
        head = _reachable_from_pods(head, netns.NODE_IP)
    stages = [(DEPLOY_DIR / "stages" / name).read_text() for name in STAGE_FILES]
    return "\n---\n".join([head.rstrip(), *(s.rstrip() for s in stages)]) + "\n"


def _reachable_from_pods(head: str, node_ip: str) -> str:
    """Inside the run's own network namespace, the real node's pods call the API server through the
    kubernetes Service (in-cluster clients: the portal's controller and workers). The Service's
    endpoint is the address the server advertises, so it advertises the node's address and listens
    on it as well as on loopback, where the kubeconfig points. Outside that namespace nothing runs
    a pod, and everything stays on loopback."""
    config, *rest = yaml.safe_load_all(head)
    (apiserver,) = (p for p in config["componentsPatches"] if p["name"] == "kube-apiserver")
    apiserver["extraArgs"] += [
        {"key": "bind-address", "value": "0.0.0.0"},  # the last of a repeated flag wins  # noqa: S104
        {"key": "advertise-address", "value": node_ip},
    ]
    return yaml.safe_dump_all([config, *rest], sort_keys=False)


def write_config(path: Path, *, bin_dir: Path, pki_dir: Path, logs_file: Path = DEFAULT_LOGS_FILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_config(bin_dir=bin_dir, pki_dir=pki_dir, logs_file=logs_file))
    return path
