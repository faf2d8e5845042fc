"""`plan_cycle`: the one entry point the admission loop calls each cycle."""

from __future__ import annotations

from datetime import datetime

from workloads.queue.decide import decide
from workloads.queue.explain import explain_all
from workloads.queue.index import QueueIndex
from workloads.queue.model import ClusterState, CyclePlan


def plan_cycle(
    state: ClusterState, now: datetime, *, explain: bool = True, queue: QueueIndex | None = None
) -> CyclePlan:
    """Admissions, preemptions due, new notices, notices to withdraw and (when `explain`) an
    `Explanation` for every pending job. Pure: the caller applies the plan and keeps the notices.
    A caller that keeps the queue between cycles passes it as `queue` (index of state.pending)."""
    d = decide(state, now, queue)
    explanations = {}
    if explain:
        explanations = explain_all(state, now, d)
    return CyclePlan(
        admit=d.result.admitted,
        preempt=d.reclaimer.preempt,
        notices=d.reclaimer.notices,
        withdraw=d.reclaimer.withdrawn(),
        explanations=explanations,
        held=dict(d.holder.held),
    )
