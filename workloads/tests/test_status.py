from __future__ import annotations

from typing import Any

from workloads.choices import JobState
from workloads.k8s.status import observe


def job(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "job-x"}, "spec": {}, "status": {"conditions": conditions or []}}


def pod(phase: str, exit_code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "startTime": "2026-11-30T10:00:00Z"}
    if exit_code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": exit_code}}}]
    return {
        "metadata": {"name": "job-x-abc", "creationTimestamp": "2026-11-30T10:00:00Z"},
        "spec": {"nodeName": "gpu-node-0"},
        "status": status,
    }


def test_missing_job_is_no_evidence() -> None:
    assert observe(None, []).state is None


def test_suspended_job_without_pods_stays() -> None:
    assert observe(job(), []).state is None


def test_running_pod_means_running() -> None:
    obs = observe(job(), [pod("Running")])
    assert (obs.state, obs.node, obs.pod_name) == (JobState.RUNNING, "gpu-node-0", "job-x-abc")


def test_complete_condition_means_succeeded() -> None:
    cond = {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-30T10:01:00Z"}
    obs = observe(job([cond]), [pod("Succeeded", 0)])
    assert (obs.state, obs.exit_code) == (JobState.SUCCEEDED, 0)


def test_failed_condition_carries_reason_and_exit_code() -> None:
    cond = {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "has reached the limit",
    }
    obs = observe(job([cond]), [pod("Failed", 3)])
    assert obs.state == JobState.FAILED
    assert obs.exit_code == 3
    assert obs.reason.startswith("BackoffLimitExceeded")


def test_failed_pod_without_job_condition_is_not_yet_failure() -> None:
    assert observe(job(), [pod("Failed", 3)]).state == JobState.RUNNING


def worker(index: int, phase: str, exit_code: int | None = None, created: str = "10:00") -> dict[str, Any]:
    made = pod(phase, exit_code)
    made["metadata"] = {
        "name": f"job-x-{index}-abc",
        "creationTimestamp": f"2026-11-30T{created}:00Z",
        "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
    }
    return made


def test_a_failed_worker_speaks_for_a_job_of_several_else_the_first_worker() -> None:
    cond = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
    pods = [
        worker(0, "Running", created="10:00"),
        worker(1, "Failed", 1),
        worker(2, "Running", created="10:05"),
    ]
    obs = observe(job([cond]), pods)
    assert (obs.state, obs.exit_code, obs.pod_name) == (JobState.FAILED, 1, "job-x-1-abc")
    running = observe(job(), [worker(1, "Running", created="10:05"), worker(0, "Running")])
    assert (running.state, running.pod_name) == (JobState.RUNNING, "job-x-0-abc")


def test_the_pods_of_an_earlier_job_of_the_same_name_are_not_evidence() -> None:
    earlier = worker(1, "Failed", 1, created="10:09")
    earlier["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "first"
    now = worker(0, "Running")
    now["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "second"
    current = {**job(), "metadata": {"name": "job-x", "uid": "second"}}
    obs = observe(current, [earlier, now])
    assert (obs.state, obs.pod_name, obs.exit_code) == (JobState.RUNNING, "job-x-0-abc", None)
