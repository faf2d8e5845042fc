"""Jobs of several workers under pressure (T15), against real Postgres, Redis and the local cluster:
the controller and two Celery workers as processes, as deployed; nodes short, a stream of small
jobs beside jobs of three workers of 4 GPUs, and the controller SIGKILLed once mid-stream (its
successor takes the lease over when it expires).

Sampled every quarter second: a worker holds GPUs from its pod's binding until it ends. A job is never
seen with a worker holding GPUs while another of its workers is still gated or not made yet in two
samples running (the gates are lifted in one pass, which a single sample may catch half done), every
bound worker is on the node the queue planned for it, and every job ends succeeded. The longest time
a job was seen so is printed, not asserted (a figure for the reliability notes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from accounts.models import Quota
from deploy.localcluster import ClusterHandle
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import own_gpu_nodes, wait_for
from tests.workloads_e2e.harness import use_broker
from tests.workloads_e2e.procs import REPO, PrivateRedis, start_worker, stop_process, worker_env
from tests.workloads_e2e.sizes import SOAK
from workloads.choices import TERMINAL_STATES, JobState
from workloads.k8s import builders, paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tasks import sweep
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SMALL, GANGS = (120, 8) if SOAK else (40, 4)
PRODUCT = "Gang-T15"  # six nodes of this GPU type, the test's own (own_gpu_nodes)
SPEC = {"image": IMAGE, "cpu_millicores": 100, "memory_mib": 64, "gpu_type": PRODUCT}


def start_controller(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "controller", "--tick", "1"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class Sampler:
    """Every quarter second, each job of several workers' pods: which are bound, and where."""

    def __init__(self, kube: RealKubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.partial_runs: dict[str, int] = {}  # job uid -> partial samples in a row, the most seen
        self.partial_since: dict[str, float] = {}
        self.longest_partial_s = 0.0
        self.bound: dict[str, dict[int, str]] = {}  # job uid -> worker index -> node
        self.samples = 0
        self.stop = threading.Event()
        self._row: dict[str, int] = {}

    def _sample(self) -> None:
        body = self.kube.get(paths.pods(self.namespace)) or {}
        jobs: dict[str, list[dict[str, Any]]] = {}
        for pod in body.get("items") or []:
            labels = pod["metadata"].get("labels") or {}
            if WORKER_INDEX_LABEL in labels:
                jobs.setdefault(labels[UID_LABEL], []).append(pod)
        now = time.monotonic()
        for uid, pods in jobs.items():
            # Bound and not ended: holding its GPUs. A worker that has ended (they end one by one)
            # was started; one still gated, or not made yet, was not.
            bound = [p for p in pods if p["spec"].get("nodeName") and _phase(p) in ("Pending", "Running")]
            for pod in bound:
                index = int(pod["metadata"]["labels"][WORKER_INDEX_LABEL])
                self.bound.setdefault(uid, {})[index] = pod["spec"]["nodeName"]
            env = pods[0]["spec"]["containers"][0]["env"]
            workers = int(next(e["value"] for e in env if e["name"] == "WORLD_SIZE"))
            made = {p["metadata"]["labels"][WORKER_INDEX_LABEL] for p in pods}
            partial = bool(bound) and (any(_gated(p) for p in pods) or len(made) < workers)
            if partial:
                self._row[uid] = self._row.get(uid, 0) + 1
                self.partial_since.setdefault(uid, now)
            else:
                self._row[uid] = 0
                if uid in self.partial_since:
                    self.longest_partial_s = max(self.longest_partial_s, now - self.partial_since.pop(uid))
            self.partial_runs[uid] = max(self.partial_runs.get(uid, 0), self._row[uid])
        self.samples += 1

    def run(self) -> None:
        while not self.stop.wait(0.25):
            self._sample()


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == builders.WORKER_GATE for g in pod["spec"].get("schedulingGates") or [])


def _stream(world: World, kill: Any) -> Iterator[Job]:
    """Small jobs one every 0.5 s, a job of three workers of 4 GPUs every SMALL // GANGS of them;
    `kill` is called halfway."""
    every = SMALL // GANGS
    for i in range(SMALL):
        if i == SMALL // 2:
            kill()
        if i % every == 1:
            spec = {**SPEC, "workers": 3, "gpus": 4, "simulate": {"run_seconds": 8}}
            yield services.job_submit(actor=world.member, project=world.alpha, data=spec)
        spec = {**SPEC, "gpus": 1 + i % 2, "simulate": {"run_seconds": 3 + i % 4}}
        yield services.job_submit(actor=world.member, project=world.alpha, data=spec)
        time.sleep(0.5)


def test_no_worker_holds_gpus_while_its_job_is_incomplete_with_small_jobs_and_a_killed_controller(
    world: World,
    kube: RealKubeClient,
    k8s_cluster: ClusterHandle,
    tmp_path: Path,
    figures: Callable[[str], None],
) -> None:
    allow_images(world.alpha)
    Quota.objects.filter(project=world.alpha).update(
        gpus=24, max_concurrent_jobs=200, cpu_millicores=200_000, memory_mib=400_000
    )
    with own_gpu_nodes(kube, 6, PRODUCT):
        jobs, sampler = _drill(world, kube, k8s_cluster, tmp_path)
    gangs = list(Job.objects.filter(pk__in=[j.pk for j in jobs], workers__gt=1))
    figures(
        f"T15: {len(jobs) - len(gangs)} small jobs, {len(gangs)} of 3 workers, {sampler.samples} samples; "
        f"longest a job had part of its workers bound: {sampler.longest_partial_s:.2f} s"
    )
    assert len(gangs) == GANGS
    assert {j.state for j in Job.objects.filter(pk__in=[j.pk for j in jobs])} == {JobState.SUCCEEDED}
    assert all(runs <= 1 for runs in sampler.partial_runs.values()), sampler.partial_runs
    for job in gangs:
        seen = sampler.bound.get(str(job.uid), {})
        assert seen == dict(enumerate(job.planned_nodes)), (job.pk, seen, job.planned_nodes)


def _drill(
    world: World, kube: RealKubeClient, k8s_cluster: ClusterHandle, tmp_path: Path
) -> tuple[list[Job], Sampler]:
    """The stream with the processes running and the sampler watching, until every job ended."""
    redis = PrivateRedis(tmp_path)
    redis.start()
    env = worker_env(
        redis_url=redis.url,
        kubeconfig=str(k8s_cluster.kubeconfig),
        prefix=settings.GPUPORTAL_NAMESPACE_PREFIX,
    )
    workers = [start_worker(env, tmp_path / f"w{i}.log", f"w{i}") for i in range(2)]
    controllers = [start_controller(env, tmp_path / "controller-0.log")]
    sampler = Sampler(kube, world.alpha.namespace)
    thread = threading.Thread(target=sampler.run, daemon=True)

    def kill() -> None:
        os.killpg(controllers[0].pid, signal.SIGKILL)
        controllers[0].wait(timeout=30)
        controllers.append(start_controller(env, tmp_path / "controller-1.log"))

    try:
        with use_broker(redis.url):
            thread.start()
            jobs = list(_stream(world, kill))

            def settled() -> bool:
                sweep()
                ended = Job.objects.filter(pk__in=[j.pk for j in jobs], state__in=TERMINAL_STATES)
                return ended.count() == len(jobs)

            wait_for(settled, 600, "every job ended", every=3)
    finally:
        sampler.stop.set()
        thread.join(timeout=10)
        for proc in [*controllers, *workers]:
            stop_process(proc)
        redis.stop()
    return jobs, sampler
