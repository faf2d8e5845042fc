"""The chart's node DaemonSet on the real node, from the node image `make images` builds: its device
plugin registers with the real kubelet and serves a GPU pod, and its agent signs in to a live portal
with its projected ServiceAccount token and sends samples (NVML simulated: `node.backend=sim`).

It starts a node of its own (as test_node_lifecycle.py does): the session's node has the in-process
plugin on the kubelet's fixed device-plugin directory, and two plugins of one resource would clash.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import RealNode, start_real_node
from deploy.localcluster.realnode import config as rc
from gpu.models import Gpu
from tests.cluster.helpers import wait_for
from tests.gpu_e2e.test_agent_service_account import mirror, samples_of
from tests.helm.chart import CHART, Kube
from tests.realnode.conftest import require_netns
from tests.realnode.helpers import allocatable, log_vars, run_to_end
from tests.realnode.images import load_built_image
from tests.workloads_e2e.live_portal import live_portal
from workloads.k8s.client import RealKubeClient

pytestmark = pytest.mark.django_db(transaction=True)
NODE = "gpu-real-ds"
NODE_NAMESPACE = "gpu-portal-system"
MPS_HOST_ROOT = Path("/run/gpu-portal")  # the chart's hostPath for the MPS pipes


@pytest.fixture
def ds_node(k8s_cluster: ClusterHandle) -> Iterator[RealNode]:
    require_netns()
    had_mps_root = MPS_HOST_ROOT.exists()
    node = start_real_node(k8s_cluster, name=NODE)
    try:
        load_built_image(node, "node")
        yield node
    finally:
        Kube(k8s_cluster.kubeconfig).kubectl(
            "delete", "namespace", NODE_NAMESPACE, "--ignore-not-found", "--wait"
        )
        left = node.stop()
        if not had_mps_root:
            shutil.rmtree(MPS_HOST_ROOT, ignore_errors=True)
    assert not left, f"the real node left the host changed: {left}"


def _daemonset(
    cluster: ClusterHandle, node: RealNode, portal_url: str, tmp_path: Path
) -> list[dict[str, Any]]:
    """The chart's node part, for the real node: simulated NVML, its kubelet root, the live portal."""
    node_values = {
        "backend": "sim",
        "kubeletRootDir": str(node.dirs.kubelet_root),
        "portalUrl": portal_url,
        "image": {"repository": "gpu-portal/node", "pullPolicy": "Never"},
        # null drops the chart's default selector (helm merges maps): this node has no GPU label.
        "nodeSelector": {"nvidia.com/gpu.present": None, rc.REAL_NODE_LABEL: "true"},
        "tolerations": [{"key": rc.REAL_NODE_LABEL, "operator": "Exists"}],
    }
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"node": node_values}))
    text = Kube(cluster.kubeconfig).helm("template", "gp", str(CHART), "-n", "gpu-portal", "-f", str(values))
    docs = [d for d in yaml.safe_load_all(text) if d]
    return [d for d in docs if d["metadata"].get("namespace") == NODE_NAMESPACE or d["kind"] == "Namespace"]


def test_the_charts_node_daemonset_serves_gpus_and_sends_samples_from_the_real_node(
    ds_node: RealNode,
    k8s_cluster: ClusterHandle,
    kube_api: client.ApiClient,
    k8s_namespace: str,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(kube_api)
    docs = _daemonset(k8s_cluster, ds_node, "", tmp_path)
    sa = next(d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount")
    env = {"GPUPORTAL_AGENT_SERVICE_ACCOUNTS": f"{NODE_NAMESPACE}:{sa}"}
    # On the node's address, which its pods reach (not loopback); inside the run's own namespace.
    with live_portal(k8s_cluster, tmp_path, host=ds_node.ip, env=env) as url:
        manifest = tmp_path / "node.yaml"
        manifest.write_text(yaml.safe_dump_all(_daemonset(k8s_cluster, ds_node, url, tmp_path)))
        Kube(k8s_cluster.kubeconfig).kubectl("apply", "-f", str(manifest))

        offered = lambda: allocatable(core, ds_node.name).get("nvidia.com/gpu", "0") != "0"  # noqa: E731
        _wait(k8s_cluster, offered, "the DaemonSet's plugin offering GPUs")
        gpus = int(allocatable(core, ds_node.name)["nvidia.com/gpu"])
        # The Node row the node watch writes once the capacity shows (the portal takes no more GPUs
        # from a node's agent than its Kubernetes capacity).
        mirror(RealKubeClient(kube_api), ds_node.name)
        code, log = run_to_end(core, k8s_namespace, "uses-a-gpu", "env", limits={"nvidia.com/gpu": "1"})
        assert code == 0, log
        visible = log_vars(log)["NVIDIA_VISIBLE_DEVICES"]
        assert visible.startswith("GPU-"), visible
        assert "," not in visible, visible

        _wait(k8s_cluster, lambda: samples_of(ds_node.name) > 0, "the agent's samples in the portal")
        uuids = set(Gpu.objects.filter(node__name=ds_node.name).values_list("uuid", flat=True))
    assert visible in uuids
    assert len(uuids) == gpus


def _wait(cluster: ClusterHandle, probe: Callable[[], bool], what: str) -> None:
    """wait_for, failing with the DaemonSet pod's state and logs."""
    try:
        wait_for(probe, 60, what)
    except TimeoutError as exc:
        kube = Kube(cluster.kubeconfig)
        pods = kube.kubectl("-n", NODE_NAMESPACE, "get", "ds,pods,events", "-o", "wide", check=False)
        logs = kube.kubectl(
            "-n",
            NODE_NAMESPACE,
            "logs",
            "--all-containers",
            "-l",
            "app.kubernetes.io/component=node",
            "--tail=40",
            check=False,
        )
        raise AssertionError(f"{exc}\n{pods[-4000:]}\n{logs[-4000:]}") from exc
