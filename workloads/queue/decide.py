"""One decision pass over a fresh ledger: order the queue, admit, reclaim. Pure.

`plan_cycle` turns a `Decision` into the plan; `explain` re-runs it with changes to find hints.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from workloads.queue.admit import Block, PassResult, admit_queues
from workloads.queue.capacity import Ledger, build_ledger
from workloads.queue.fairshare import usage_now
from workloads.queue.hold import NodeHolder
from workloads.queue.index import QueueIndex
from workloads.queue.model import ClusterState, PendingJob, Usage
from workloads.queue.ordering import order, sort_key
from workloads.queue.preempt import Reclaimer


@dataclass
class Decision:
    pending: tuple[PendingJob, ...]
    usage: Usage
    result: PassResult
    reclaimer: Reclaimer
    holder: NodeHolder

    @cached_property
    def ordered(self) -> list[PendingJob]:
        """The whole queue in order, held jobs included: only explanations need it."""
        return order(self.pending, self.usage)


def decide(state: ClusterState, now: datetime, queue: QueueIndex | None = None) -> Decision:
    """Run both admission passes, with reclaim, on a fresh ledger. `queue` is the caller's ordered
    index of exactly `state.pending`, kept between cycles; without it one is built here."""
    s = state.settings
    usage = usage_now(state.usage, state.running, now, s.half_life_hours, s.slices_per_gpu)
    queue = queue if queue is not None else QueueIndex.of(state.pending)
    ledger = build_ledger(state, now)
    reclaimer, holder = Reclaimer(state, now, ledger), NodeHolder(state, now)

    def rescue(job: PendingJob, ledger: Ledger, blocked: Block) -> Block | None:
        return reclaimer(job, ledger, blocked) or holder(job, ledger, blocked)

    holder.first(
        sorted((j for j in state.pending if holder.due(j)), key=lambda j: sort_key(j, usage)), ledger
    )
    result = admit_queues(queue.queues(usage), ledger, usage, s.borrowing_enabled, rescue)
    return Decision(state.pending, usage, result, reclaimer, holder)
