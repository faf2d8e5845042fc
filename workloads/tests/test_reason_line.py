"""The reason people read on the pages, in the API's `reason` and in `gpuctl jobs`."""

from __future__ import annotations

from datetime import UTC, datetime

from workloads.messages import queue_summary_of, reason_line

STARTED = datetime(2026, 12, 7, 14, 2, tzinfo=UTC)


def test_a_running_job_says_where_and_since_when_not_its_pod() -> None:
    raw = "Pod job-64aa7ff8-0c1e-4b7a-9d3f-1a2b3c4d5e6f-wk599 on gpu-node-1"
    line = reason_line(
        state="running", state_reason=raw, node="gpu-node-1", nodes=1, started_at=STARTED, queue=None
    )
    assert line == "running on gpu-node-1 since 14:02 UTC"
    several = reason_line(
        state="running", state_reason=raw, node="n0", nodes=4, started_at=STARTED, queue=None
    )
    assert several == "running on 4 nodes since 14:02 UTC"


def test_a_queued_job_says_what_it_waits_for() -> None:
    queue = queue_summary_of({"sentence": "project quota 6/6 GPUs in use"}, held=False)
    line = reason_line(
        state="queued", state_reason="submitted", node="", nodes=1, started_at=None, queue=queue
    )
    assert line == "waiting: project quota 6/6 GPUs in use"
    first = queue_summary_of({}, held=False)
    line = reason_line(
        state="queued", state_reason="submitted", node="", nodes=1, started_at=None, queue=first
    )
    assert line == "waiting for the next admission cycle"


def test_starting_and_ended_jobs() -> None:
    assert reason_line(
        state="admitted", state_reason="", node="n1", nodes=1, started_at=None, queue=None
    ) == ("starting on n1")
    ended = "Pod job-x-abc failed (exit code 3); its Job is gone"
    assert (
        reason_line(state="failed", state_reason=ended, node="n1", nodes=1, started_at=None, queue=None)
        == ended
    )
