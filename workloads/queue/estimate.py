"""Estimated start times by simulating forward: running jobs end at their expected end (history
median if known, capped by max runtime; a job noticed for preemption ends at its notice deadline),
then the queue is re-admitted in order at every end, with the same pass the cycle uses (no
reclaim; fair-share order frozen at its current value)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from workloads.queue.admit import admit_all
from workloads.queue.capacity import Job, Ledger, Placement, running_placement
from workloads.queue.model import Admission, ClusterState, JobId, PendingJob, RunningJob, Usage

MAX_STEPS = 5_000


def expected_runtime_s(job: Job, table: Mapping[tuple[str, str], float]) -> float:
    hist = table.get((job.project, job.owner)) or table.get((job.project, ""))
    return min(float(job.max_runtime_s), hist) if hist else float(job.max_runtime_s)


def _expected_ends(state: ClusterState, now: datetime) -> Iterable[tuple[datetime, RunningJob]]:
    deadline = {n.job_id: n.deadline for n in state.notices}
    for r in state.running:
        exp = r.started_at + timedelta(seconds=expected_runtime_s(r, state.expected_runtime_s))
        if exp < now:
            exp = max(now, r.started_at + timedelta(seconds=r.max_runtime_s))
        if r.id in deadline:
            exp = min(exp, max(now, deadline[r.id]))
        yield exp, r


def _running_end(state: ClusterState, now: datetime) -> Iterable[tuple[datetime, Job, Placement]]:
    for exp, r in _expected_ends(state, now):
        yield exp, r, running_placement(r)


def next_end(state: ClusterState, now: datetime, nodes: set[str]) -> tuple[datetime, RunningJob] | None:
    """The running job holding whole GPUs on any of `nodes` that is expected to end first."""
    ends = [(at, r) for at, r in _expected_ends(state, now) if r.gpus and nodes & set(r.nodes or (r.node,))]
    return min(ends, key=lambda e: (e[0], e[1].id), default=None)


def estimate_starts(
    state: ClusterState,
    now: datetime,
    ordered: list[PendingJob],
    admitted: list[Admission],
    ledger: Ledger,
    usage: Usage,
) -> dict[JobId, datetime]:
    """`ledger` is a fresh ledger of the state with this cycle's admissions taken (no reservations)."""
    by_id = {j.id: j for j in ordered}
    events: list[tuple[datetime, int, Job, Placement]] = []
    seq = 0
    starts: dict[JobId, datetime] = {}

    def push(at: datetime, job: Job, place: Placement) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, job, place))

    for at, r, place in _running_end(state, now):
        push(at, r, place)
    for adm in admitted:
        job = by_id[adm.job_id]
        starts[job.id] = now
        push(now + timedelta(seconds=expected_runtime_s(job, state.expected_runtime_s)), job, _place(adm))
    waiting = [j for j in ordered if not j.held and j.id not in starts]
    for _ in range(MAX_STEPS):
        if not events or not waiting:
            break
        t = events[0][0]
        while events and events[0][0] <= t:
            _, _, ended, place = heapq.heappop(events)
            ledger.release(ended, place)
        got = admit_all(waiting, ledger, usage, state.settings.borrowing_enabled, None).admitted
        for adm in got:
            starts[adm.job_id] = t
            new = by_id[adm.job_id]
            push(t + timedelta(seconds=expected_runtime_s(new, state.expected_runtime_s)), new, _place(adm))
        if got:
            waiting = [j for j in waiting if j.id not in starts]
    return starts


def _place(adm: Admission) -> Placement:
    return Placement(adm.node, adm.gpus, adm.slice_placement, adm.nodes)
