"""Portal jobs on the real node: a real command in the busybox image built here, its log followed to
the end, its exit code and failure reason from the container, and a cancel that kills the container.

The reconcile task and the admission cycle are called inline, as in tests/workloads_e2e."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from deploy.localcluster.realnode import RealNode
from plugin.names import REAL_NODE_LABEL
from tests.fixtures.personas import World
from tests.realnode.helpers import submit_real
from tests.workloads_e2e.procs import wait_for
from tests.workloads_e2e.test_job_lifecycle import drive
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.logs import log_lines
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tasks import reconcile_job

pytestmark = pytest.mark.django_db
SCRIPT = "echo start; for i in 1 2 3; do echo step $i; sleep 1; done; echo done; exit 3"


def _follow(job: Job) -> tuple[threading.Thread, list[bytes]]:
    chunks: list[bytes] = []
    # Its own copy, project loaded here: the reader's connection cannot see the test's rows, and
    # drive() refreshes (and so forgets the project of) the test's copy meanwhile.
    mine = Job.objects.select_related("project").get(pk=job.pk)
    reader = threading.Thread(target=lambda: chunks.extend(log_lines(mine, follow=True)), daemon=True)
    reader.start()
    return reader, chunks


def test_a_job_runs_its_command_its_log_ends_with_it_and_exit_3_fails_it(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World, slow_container_start: None
) -> None:
    job = submit_real(world, SCRIPT)
    _drive_to_pod(job)
    # Followed while the container is still being created: pods/log answers 400 until it starts.
    assert job.state != JobState.RUNNING
    reader, chunks = _follow(job)
    drive(job, {JobState.RUNNING})
    assert job.node == real_node.name
    reader.join(timeout=30)  # the stream ends when the container exits, not at a timeout
    assert not reader.is_alive(), "the followed log did not end when the container exited"
    assert b"".join(chunks).decode().split() == ["start", "step", "1", "step", "2", "step", "3", "done"]

    drive(job, {JobState.FAILED, JobState.SUCCEEDED})
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)
    # The Job controller's verdict on the real container's failure (the code is in exit_code).
    assert job.state_reason.startswith("BackoffLimitExceeded"), job.state_reason
    assert "step 3" in job.log_tail


def _cancel_and_see_it_end(kube: RealKubeClient, world: World, script: str) -> Job:
    job = submit_real(world, script)
    drive(job, {JobState.RUNNING})
    pod = wait_for(lambda: _pod(kube, job), 30, "the job's pod")
    pid = wait_for(lambda: _container_pid(pod["metadata"]["uid"]), 30, "the container's process")

    services.job_cancel(actor=world.owner, job=job)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 60, f"the container's process {pid} to end")
    wait_for(lambda: _pod(kube, job) is None, 60, "the pod to go")
    return job


def test_cancel_kills_the_real_container(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World
) -> None:
    # The shell ends on the kubelet's SIGTERM (a bare `sleep` as PID 1 ignores it: 30 s of grace).
    _cancel_and_see_it_end(portal_on_real_node, world, "echo up; trap 'exit 143' TERM; sleep 600 & wait")


def test_a_nul_byte_in_the_log_never_keeps_a_cancelled_container_running(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World
) -> None:
    script = "printf 'up\\000nul\\n'; trap 'exit 143' TERM; sleep 600 & wait"
    job = _cancel_and_see_it_end(portal_on_real_node, world, script)
    assert job.log_tail.startswith("up\ufffdnul"), repr(job.log_tail)


def _drive_to_pod(job: Job) -> None:
    """Admit and reconcile until the job has a pod (it need not run yet)."""

    def step() -> bool:
        admission_cycle()
        reconcile_job(job.pk)
        job.refresh_from_db()
        return bool(job.pod_name)

    wait_for(step, 60, f"{job} has a pod", every=0.5)


def _pod(kube: RealKubeClient, job: Job) -> dict[str, Any] | None:
    pods = (kube.get(paths.pods(job.namespace)) or {}).get("items") or []
    return next((p for p in pods if p["spec"].get("nodeSelector", {}).get(REAL_NODE_LABEL)), None)


def _container_pid(pod_uid: str) -> int | None:
    """The host pid of the container's `sleep` (in the pod's cgroup; the pause process is not sleep)."""
    for proc in Path("/proc").iterdir():
        try:
            ours = proc.name.isdigit() and f"pod{pod_uid}" in (proc / "cgroup").read_text()
            if ours and (proc / "comm").read_text().strip() == "sleep":
                return int(proc.name)
        except OSError:
            continue
    return None
