"""`plan_cycle`: the one entry point the admission loop calls each cycle."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workloads.queue.admit import PassResult, admit_all
from workloads.queue.capacity import build_ledger
from workloads.queue.fairshare import usage_now
from workloads.queue.model import ClusterState, CyclePlan, PendingJob, Usage
from workloads.queue.ordering import order
from workloads.queue.preempt import Reclaimer


@dataclass
class Decision:
    ordered: list[PendingJob]
    usage: Usage
    result: PassResult
    reclaimer: Reclaimer


def decide(state: ClusterState, now: datetime) -> Decision:
    """Order the queue and run both admission passes, with reclaim, on a fresh ledger."""
    s = state.settings
    usage = usage_now(state.usage, state.running, now, s.half_life_hours, s.slices_per_gpu)
    ordered = order(state.pending, usage)
    ledger = build_ledger(state, now)
    reclaimer = Reclaimer(state, now, ledger)
    result = admit_all(ordered, ledger, usage, s.borrowing_enabled, reclaimer)
    return Decision(ordered, usage, result, reclaimer)


def plan_cycle(state: ClusterState, now: datetime, *, explain: bool = True) -> CyclePlan:
    """Admissions, preemptions due, new notices, notices to withdraw and (when `explain`) an
    `Explanation` for every pending job. Pure: the caller applies the plan and keeps the notices."""
    d = decide(state, now)
    explanations = {}
    if explain:
        from workloads.queue.explain import explain_all

        explanations = explain_all(state, now, d)
    return CyclePlan(
        admit=d.result.admitted,
        preempt=d.reclaimer.preempt,
        notices=d.reclaimer.notices,
        withdraw=d.reclaimer.withdrawn(),
        explanations=explanations,
    )
