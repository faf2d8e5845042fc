"""The project's device plugin against the real kubelet: registration, ListAndWatch, GetPreferredAllocation,
Allocate, PreStartContainer with PodResources, health, and re-registration after kubelet restarts.

The tests share one node and one plugin (session fixtures); the unhealthy-GPU test comes last in this
file, as it changes what the node offers for a while.
"""

from __future__ import annotations

import functools
import time

from kubernetes import client

from deploy.localcluster.realnode import RealNode
from plugin.allocator import CONTAINER_MPS_ROOT
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from tests.cluster.helpers import wait_for
from tests.realnode.conftest import NodePlugin
from tests.realnode.helpers import allocatable, log_vars, run_to_end

# The promise for the real kubelet (docs/reliability.md); the test kubelet is held to 5 s.
REREGISTER_BUDGET_S = 10.0


def _wait_offers(
    core: client.CoreV1Api, node: str, gpus: int, slices: int, timeout: float, what: str
) -> None:
    """Until the Node's allocatable shows `gpus` whole GPUs and `slices` MPS slices."""

    def offers() -> bool:
        now = allocatable(core, node)
        return now.get(RESOURCE_GPU) == str(gpus) and now.get(RESOURCE_SHARED) == str(slices)

    wait_for(offers, timeout, what)


def test_both_resources_register_and_the_node_offers_them(
    node_plugin: NodePlugin, real_node: RealNode, kube_api: client.ApiClient
) -> None:
    core = client.CoreV1Api(kube_api)
    # Three whole GPUs and the fourth as four MPS slices.
    _wait_offers(core, real_node.name, 3, node_plugin.slices, 30, "the node's allocatable")
    assert all(r.registrations >= 1 for r in node_plugin.daemon.resources.values())


def test_a_two_gpu_pod_gets_the_preferred_pair_by_uuid(
    node_plugin: NodePlugin, real_node: RealNode, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    _wait_offers(core, real_node.name, 3, node_plugin.slices, 30, "the node's allocatable")
    code, log = run_to_end(core, k8s_namespace, "two", "env", limits={RESOURCE_GPU: "2"})

    assert code == 0, log
    env = log_vars(log)
    visible = env["NVIDIA_VISIBLE_DEVICES"].split(",")
    uuids = {g.uuid for g in node_plugin.sim.gpus}
    assert len(set(visible)) == 2, visible
    assert set(visible) <= uuids - {node_plugin.shared_uuid}, visible
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"]  # UUIDs, never a relative index
    # The kubelet asked the plugin and took its answer: the NVLinked pair (GPUs 1 and 2).
    asks = [(q, a) for q, a in node_plugin.preferred if q.container_requests[0].allocation_size == 2]
    assert asks, "the real kubelet never called GetPreferredAllocation for 2 GPUs"
    nvlinked = {node_plugin.sim.gpus[1].uuid, node_plugin.sim.gpus[2].uuid}
    assert set(asks[-1][1].container_responses[0].deviceIDs) == nvlinked == set(visible)


def test_an_mps_slice_pod_gets_its_limits_and_the_mps_directory(
    node_plugin: NodePlugin, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    script = 'env; [ -S "$CUDA_MPS_PIPE_DIRECTORY/control.sock" ] && echo PIPE=socket; ls -d /dev/shm'
    code, log = run_to_end(core, k8s_namespace, "slices", script, limits={RESOURCE_SHARED: "2"})

    assert code == 0, log
    env = log_vars(log)
    shared = node_plugin.sim.by_uuid(node_plugin.shared_uuid)
    assert env["NVIDIA_VISIBLE_DEVICES"] == shared.uuid
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"  # 2 of 4 slices
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"{shared.uuid}={shared.memory_mib // 2}M"
    # The GPU's MPS control daemon, mounted from the plugin's MPS root into the container.
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == f"{CONTAINER_MPS_ROOT}/{shared.uuid}/pipe"
    assert env["PIPE"] == "socket"


def test_each_of_5_kubelet_restarts_is_followed_by_reregistration_within_10s(
    node_plugin: NodePlugin, real_node: RealNode, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    resources = node_plugin.daemon.resources.values()

    def registered_since(t: float) -> bool:
        return all(r.last_registered_at > t for r in resources)

    times = []
    for _ in range(5):
        started = real_node.restart_kubelet()
        wait_for(functools.partial(registered_since, started), 30, "re-registration")
        times.append(round(max(r.last_registered_at for r in resources) - started, 2))
    # The last registration serves: the new kubelet allocates a GPU through it.
    code, log = run_to_end(core, k8s_namespace, "after", "env", limits={RESOURCE_GPU: "1"})
    assert code == 0, log
    assert log_vars(log)["NVIDIA_VISIBLE_DEVICES"].startswith("GPU-"), log
    print(f"re-registration after each kubelet restart (s): {times}")
    assert max(times) <= REREGISTER_BUDGET_S, times


def test_an_unhealthy_gpu_drops_from_allocatable_and_comes_back(
    node_plugin: NodePlugin, real_node: RealNode, kube_api: client.ApiClient
) -> None:
    core = client.CoreV1Api(kube_api)
    _wait_offers(core, real_node.name, 3, node_plugin.slices, 30, "the node's allocatable")
    node_plugin.sim.inject_xid(node_plugin.sim.gpus[0].uuid, 48)  # a double-bit ECC error
    t0 = time.monotonic()
    _wait_offers(core, real_node.name, 2, node_plugin.slices, 10, "the GPU to drop")
    # Back after the plugin's recovery interval (10 s here) with no new error.
    _wait_offers(core, real_node.name, 3, node_plugin.slices, 40, "the GPU to return")
    assert time.monotonic() - t0 >= node_plugin.daemon.health.rule.recovery_s - 1
