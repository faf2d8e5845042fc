"""Self-healing GPUs end to end: real Postgres, the real local cluster (kwok GPU nodes), simulated agents.

Two nodes keep 2 free GPUs each; a 2-GPU job runs on one. The simulated agents (portal/demo/agents.py)
post through the real ingest view, in this process. An application XID on one of the job's GPUs
changes nothing; a critical XID makes that GPU unhealthy at once, the job is preempted with the
reason (not failed), and the node task writes `in_service: false` for the GPU into the plugin's
ConfigMap. kwok nodes run no kubelet or device plugin, so the node's plugin runs here, on simulated
NVML with the agents' GPU UUIDs, under the test kubelet (real device-plugin gRPC); the test projects
the ConfigMap into its file as the kubelet does, and the GPU turns Unhealthy in ListAndWatch (only the
portal's path is exercised: the XID is not injected into the plugin's NVML). The test also does the
kubelet's part on the kwok Node: the unhealthy device leaves its allocatable. The queue then reruns
the job on the other node. After the clean interval a clean sample brings the GPU back, the ConfigMap
offers it again and the plugin lists it Healthy and allocates it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

import httpx
import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from gpu import app_settings as gpu_settings
from gpu import services as gpu_services
from gpu.choices import GpuHealth
from gpu.models import Gpu, Node
from plugin.daemon import PluginConfig, PluginDaemon
from plugin.devices import RESOURCE_GPU
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimGpu as NvmlGpu
from plugin.sim.nvml import SimNvml
from portal.demo.agents import SimAgents
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import wait_for
from tests.workloads_e2e.test_queue_cluster import _gpu_pod
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import live_cluster, node_states
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.errors import K8sError
from workloads.models import Job
from workloads.queue import NodeState
from workloads.services import jobs as services
from workloads.tasks import reconcile_job, reconcile_node
from workloads.tests.conftest import IMAGE

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
SPEC: dict[str, Any] = {
    "image": IMAGE,
    "gpus": 2,
    "cpu_millicores": 100,
    "memory_mib": 64,
    "simulate": {"run_seconds": 900},
}
CLEAN_S = 3


class _InProcess:
    """What SimAgents.tick needs of an httpx.Client, answered by the real ingest view in this process."""

    def __init__(self) -> None:
        self.client = APIClient()

    def post(self, url: str, *, content: bytes, headers: dict[str, str]) -> Any:
        return self.client.post(
            urlparse(url).path,
            content,
            content_type=headers["Content-Type"],
            HTTP_AUTHORIZATION=headers["Authorization"],
        )


def _two_nodes_with_2_free(kube: RealKubeClient, ns: str) -> list[str]:
    def two_free() -> tuple[NodeState, ...] | None:  # earlier tests' pods may still be going
        states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
        return states if sum(n.schedulable and n.free_gpus >= 2 for n in states) >= 2 else None

    states = wait_for(two_free, 180, "two nodes with 2 free GPUs")
    keep = [n.name for n in states if n.schedulable and n.free_gpus >= 2][:2]
    for n in states:
        extra = n.free_gpus - (2 if n.name in keep else 0)
        if extra > 0:
            kube.create(paths.pods(ns), _gpu_pod(f"fill-{n.name}", extra, n.name))
    return keep


def _step(job: Job) -> Job:
    admission_cycle()
    reconcile_job(job.pk)
    job.refresh_from_db()
    return job


def _config(kube: RealKubeClient) -> dict[str, Any]:
    path = paths.configmap(gpu_settings.plugin_config_namespace(), gpu_settings.plugin_config_name())
    data = (kube.get(path) or {}).get("data") or {}
    return dict(json.loads(data.get(gpu_settings.plugin_config_key(), '{"gpus": {}}'))["gpus"])


def _set_allocatable(kube: RealKubeClient, node: str, gpus: int) -> None:
    """The kubelet's part: a device the plugin lists Unhealthy leaves the node's allocatable."""
    kube.patch(f"/api/v1/nodes/{node}/status", {"status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}})


@contextlib.contextmanager
def _node_plugin(uuids: list[str]) -> Iterator[tuple[TestKubelet, Path]]:
    """The node's device plugin (simulated NVML with the agents' GPU UUIDs) under the test kubelet,
    reading the sharing file that the kubelet projects from the ConfigMap (`_project` plays that)."""
    root = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))  # unix socket paths stay short
    kubelet = TestKubelet(root / "dp", root / "pr" / "kubelet.sock")
    kubelet.start()
    sim = SimNvml([NvmlGpu(i, u) for i, u in enumerate(uuids)], call_cost_s=20e-6)
    cfg = PluginConfig(
        plugin_dir=kubelet.plugin_dir, config_file=root / "sharing.json", mps_root=root / "mps"
    )
    cfg.tick_s = 0.1
    daemon = PluginDaemon(sim, cfg)
    daemon.start()
    try:
        kubelet.wait_registered(RESOURCE_GPU, timeout=10)
        yield kubelet, root / "sharing.json"
    finally:
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def _project(kube: RealKubeClient, file: Path) -> None:
    """What the kubelet does with a ConfigMap volume: swap the file in whole."""
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"gpus": _config(kube)}))
    tmp.replace(file)


@override_settings(GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS=CLEAN_S)
def test_a_critical_xid_requeues_the_job_which_reruns_elsewhere_and_the_gpu_returns(
    cluster_world: World, kube: RealKubeClient
) -> None:
    world = cluster_world
    fill_ns = f"fill-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": fill_ns}})
    with contextlib.suppress(K8sError):
        kube.create("/api/v1/namespaces", {"metadata": {"name": gpu_settings.plugin_config_namespace()}})
    restore: tuple[str, int] | None = None
    stack = contextlib.ExitStack()
    try:
        keep = _two_nodes_with_2_free(kube, fill_ns)
        for raw in (kube.get("/api/v1/nodes") or {}).get("items") or []:
            gpu_services.node_apply(raw=raw)
        job = services.job_submit(actor=world.member, project=world.alpha, data=SPEC)
        wait_for(lambda: _step(job).state == JobState.RUNNING, 120, "the job running", every=1.0)
        first = job.node
        assert first in keep
        agents, http = SimAgents("http://portal", [first]), cast("httpx.Client", _InProcess())
        agents.tick(http)  # the agent registers the node's GPUs; the job's pod is on GPUs 0 and 1
        sims = agents.gpus[first]
        kubelet, sharing = stack.enter_context(_node_plugin([g.uuid for g in sims]))
        _project(kube, sharing)
        kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == len(sims) and set(d.values()) == {"Healthy"})
        bad = Gpu.objects.get(uuid=sims[1].uuid)
        assert bad.health == GpuHealth.HEALTHY

        sims[0].xid = 13  # the job's own fault: nothing happens
        agents.tick(http)
        assert Gpu.objects.get(uuid=sims[0].uuid).health == GpuHealth.HEALTHY
        assert _step(job).state == JobState.RUNNING

        sims[1].xid = 79
        t0 = time.monotonic()
        agents.tick(http)
        bad.refresh_from_db()
        portal_delay = time.monotonic() - t0
        assert (bad.health, bad.offered) == (GpuHealth.UNHEALTHY, False)
        job.refresh_from_db()
        assert job.state == JobState.PREEMPTED
        assert job.state_reason == f"GPU {bad.uuid} on {first} failed: XID 79"
        agents.tick(http)  # a clean sample inside the clean interval: still out
        assert Gpu.objects.get(pk=bad.pk).health == GpuHealth.UNHEALTHY
        reconcile_node(Node.objects.get(name=first).pk)  # what the worker does with the node task
        config_delay = time.monotonic() - t0
        assert _config(kube)[bad.uuid] == {"mode": "exclusive", "in_service": False}
        _project(kube, sharing)
        kubelet.wait_devices(RESOURCE_GPU, lambda d: d[bad.uuid] == "Unhealthy", timeout=5)
        plugin_delay = time.monotonic() - t0
        print(
            f"XID 79 -> unhealthy in the portal {portal_delay:.3f} s, ConfigMap {config_delay:.3f} s, "
            f"Unhealthy in the plugin's ListAndWatch {plugin_delay:.3f} s"
        )
        assert plugin_delay <= 5.0
        total = int((kube.get(paths.node(first)) or {})["status"]["capacity"]["nvidia.com/gpu"])
        restore = (first, total)
        _set_allocatable(kube, first, total - 1)

        def elsewhere() -> bool:
            _step(job)
            return job.state == JobState.RUNNING and job.node not in ("", first)

        wait_for(elsewhere, 180, "the job requeued and running on the other node", every=1.0)
        states = list(job.events.exclude(to_state="").values_list("to_state", flat=True))
        assert states[-4:] == ["preempted", "queued", "admitted", "running"]
        assert job.node == next(n for n in keep if n != first)

        time.sleep(max(0.0, CLEAN_S - (time.monotonic() - t0)) + 0.5)
        agents.tick(http)
        bad.refresh_from_db()
        assert (bad.health, bad.offered) == (GpuHealth.HEALTHY, True)
        reconcile_node(Node.objects.get(name=first).pk)
        assert _config(kube)[bad.uuid] == {"mode": "exclusive"}
        _project(kube, sharing)
        kubelet.wait_devices(RESOURCE_GPU, lambda d: d[bad.uuid] == "Healthy", timeout=5)
        assert kubelet.allocate(RESOURCE_GPU, [bad.uuid]).envs["NVIDIA_VISIBLE_DEVICES"] == bad.uuid
    finally:
        stack.close()
        if restore:
            _set_allocatable(kube, *restore)
        for ns in (fill_ns, world.alpha.namespace):
            for pod in (kube.get(paths.pods(ns)) or {}).get("items") or []:
                kube.delete(f"{paths.pods(ns)}/{pod['metadata']['name']}")
            kube.delete(paths.namespace(ns))
