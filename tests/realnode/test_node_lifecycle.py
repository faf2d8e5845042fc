"""The real node joins, runs a real container to completion, and leaves the host as found.

It starts a node of its own (not the session `real_node`), so it can check the host after the stop.
"""

from __future__ import annotations

import uuid

from kubernetes import client

import deploy.localcluster.hoststate as hoststate
from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import config as rc
from deploy.localcluster.realnode import real_node_with_plugin, start_real_node
from tests.cluster.helpers import wait_for
from tests.realnode.conftest import require_netns
from tests.realnode.helpers import allocatable, kubectl, read_pod, real_pod, wait_terminated


def test_real_node_runs_a_container_and_leaves_the_host_as_found(
    k8s_cluster: ClusterHandle, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    require_netns()
    core = client.CoreV1Api(kube_api)
    before = hoststate.snapshot()
    node = start_real_node(k8s_cluster, name="gpu-real-lifecycle")
    try:
        (k8s_node,) = (n.to_dict() for n in core.list_node(label_selector=f"{rc.REAL_NODE_LABEL}=true").items)
        assert k8s_node["status"]["node_info"]["container_runtime_version"].startswith("containerd://")
        addresses = k8s_node["status"]["addresses"]
        assert {a["address"] for a in addresses if a["type"] == "InternalIP"} == {node.ip}
        # The node really changed the host, so the check after the stop can fail.
        assert hoststate.differences(before, hoststate.snapshot())

        marker = f"real-{uuid.uuid4().hex[:8]}"
        core.create_namespaced_pod(k8s_namespace, real_pod("hello", f"echo {marker}; echo $((6*7)); exit 3"))
        ended = wait_terminated(core, k8s_namespace, "hello")
        pod = read_pod(core, k8s_namespace, "hello")
        logs = kubectl(k8s_cluster, "logs", "--namespace", k8s_namespace, "hello")
    finally:
        left = node.stop()

    assert ended["exit_code"] == 3
    assert logs.split() == [marker, "42"]  # the shell ran it: 42, not the text of the expression
    assert pod["spec"]["node_name"] == "gpu-real-lifecycle"
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["pod_ip"].startswith("10.214.0.")  # from the node's CNI bridge (rc.POD_SUBNET)
    assert left == []
    assert hoststate.differences(before, hoststate.snapshot()) == []


def test_the_demos_real_node_offers_the_plugins_gpus_and_leaves_the_host_as_found(
    k8s_cluster: ClusterHandle, kube_api: client.ApiClient
) -> None:
    """What `make demo REAL_NODE=1` and `make cluster-up REAL_NODE=1` start: the node and the device
    plugin as a process on it (simulated NVML)."""
    require_netns()
    core = client.CoreV1Api(kube_api)
    before = hoststate.snapshot()
    with real_node_with_plugin(k8s_cluster, gpus=3) as node:
        wait_for(lambda: allocatable(core, node.name).get("nvidia.com/gpu") == "3", 30, "the plugin's GPUs")
    assert hoststate.differences(before, hoststate.snapshot()) == []
    assert not core.list_node(label_selector=f"{rc.REAL_NODE_LABEL}=true").items
