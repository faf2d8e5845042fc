"""The operator guide's "Install on a cluster", followed word for word on the local cluster: its
install block runs as written (values file, install, rollout, `helm test`), then its upgrade and
uninstall commands. The backup block needs a running Postgres, which kwok's pods are not."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from deploy.localcluster import ClusterHandle, bin_dir
from tests.helm.chart import Kube

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "operator-guide.md"


def _section() -> str:
    text = GUIDE.read_text()
    return text[text.index("## Install on a cluster") : text.index("## Production settings")]


def _run(script: str, kubeconfig: Path, workdir: Path) -> str:
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PATH": f"{bin_dir()}:/usr/bin:/bin",
        "HOME": str(workdir),
    }
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"cd {REPO}\n{script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=workdir,
    )
    assert out.returncode == 0, f"the guide's commands failed:\n{script}\n{out.stderr}\n{out.stdout}"
    return out.stdout


def test_the_install_section_works_as_written(k8s_cluster: ClusterHandle, tmp_path: Path) -> None:
    section = _section()
    install = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    upgrade = re.search(r"`(helm upgrade [^`]+)`", section)
    uninstall = re.search(r"`(helm uninstall [^`]+)`", section)
    assert upgrade is not None
    assert uninstall is not None
    # The values file is written into the repo root by the block; keep the checkout clean.
    install = install.replace("portal-values.yaml", str(tmp_path / "portal-values.yaml"))
    out = _run(install, k8s_cluster.kubeconfig, tmp_path)
    assert "Phase:          Succeeded" in out
    kube = Kube(k8s_cluster.kubeconfig)
    assert (
        kube.get("ingress", "portal-gpu-portal", "-n", "gpu-portal")["spec"]["rules"][0]["host"]
        == "portal.example.org"
    )
    values = str(tmp_path / "portal-values.yaml")
    _run(upgrade.group(1).replace("portal-values.yaml", values), k8s_cluster.kubeconfig, tmp_path)
    assert '"revision":2' in kube.helm("history", "portal", "-n", "gpu-portal", "-o", "json").replace(" ", "")
    _run(uninstall.group(1), k8s_cluster.kubeconfig, tmp_path)
    left = kube.kubectl(
        "get", "secrets,pvc", "-n", "gpu-portal", "-l", "app.kubernetes.io/instance=portal", "-o", "name"
    )
    assert sorted(left.split()) == sorted(KEPT)
    for name in KEPT:  # and the guide says so
        assert name.split("/")[1].removeprefix("portal-gpu-portal") in section


KEPT = [
    *(f"secret/portal-gpu-portal-{name}" for name in ("secret-key", "postgresql", "redis")),
    *(f"persistentvolumeclaim/data-portal-gpu-portal-{name}-0" for name in ("postgresql", "redis")),
]
