"""One decision pass over a fresh ledger: order the queue, admit, reclaim. Pure.

`plan_cycle` turns a `Decision` into the plan; `explain` re-runs it with changes to find hints.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workloads.queue.admit import PassResult, admit_all
from workloads.queue.capacity import build_ledger
from workloads.queue.fairshare import usage_now
from workloads.queue.model import ClusterState, PendingJob, Usage
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
