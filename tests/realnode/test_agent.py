"""The telemetry agent attributes GPU processes of real containers through the real kubelet's
PodResources API: a whole-GPU pod, and two pods sharing one GPU through MPS slices (told apart only by
the device ids our Allocate put in each container's environment)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED, parse_device_id
from tests.cluster.helpers import wait_for
from tests.realnode.conftest import NodePlugin
from tests.realnode.helpers import delete_pods, read_pod, real_pod

ENV_KEY = b"GPU_PORTAL_DEVICE_IDS="


def _running(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        pod = read_pod(core, namespace, name)
        return pod if pod["status"]["phase"] == "Running" else None

    return wait_for(probe, 60, f"pod {name} to run")


def _container_pid(pod_uid: str) -> int:
    """The host pid of the pod's own process: in the pod's cgroup, with our Allocate's variable."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"pod{pod_uid}" in (proc / "cgroup").read_text() and _device_ids(int(proc.name)):
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"no process of pod {pod_uid} found in /proc")


def _device_ids(pid: int) -> list[str]:
    for entry in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0"):
        if entry.startswith(ENV_KEY):
            return entry[len(ENV_KEY) :].decode().split(",")
    return []


def test_the_agent_attributes_gpu_processes_to_their_pods(
    node_plugin: NodePlugin, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    asks = {
        "whole": {RESOURCE_GPU: "1"},
        "slice-a": {RESOURCE_SHARED: "1"},
        "slice-b": {RESOURCE_SHARED: "1"},
    }
    sim, pods = node_plugin.sim, {}
    try:
        for name, limits in asks.items():
            core.create_namespaced_pod(k8s_namespace, real_pod(name, "exec sleep 300", limits=limits))
        for name in asks:
            uid = _running(core, k8s_namespace, name)["metadata"]["uid"]
            pid = _container_pid(uid)
            pods[pid] = (name, uid)
            # NVML would list the process on its GPU; the simulated one is told so.
            sim.add_process(parse_device_id(_device_ids(pid)[0])[0], pid, 512)
        socket = node_plugin.daemon.cfg.pod_resources_socket
        assert socket is not None
        samples = Collector(sim, Attributor(Path("/proc"), socket)).poll()
    finally:
        for gpu in sim.gpus:
            gpu.processes.clear()
        delete_pods(core, k8s_namespace, list(asks))  # the plugin tests after this need the GPUs free

    seen = {p.pid: p for s in samples for p in s.processes}
    assert set(seen) == set(pods)
    for pid, (name, uid) in pods.items():
        assert (seen[pid].pod_namespace, seen[pid].pod_name) == (k8s_namespace, name)
        assert (seen[pid].container, seen[pid].pod_uid) == ("main", uid)
    shared = node_plugin.shared_uuid
    on_shared = {p.pod_name for s in samples if s.gpu_uuid == shared for p in s.processes}
    assert on_shared == {"slice-a", "slice-b"}
