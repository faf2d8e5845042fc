"""The kept queue index decides exactly as sorting the whole queue each cycle did."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from bench import b3_admission
from workloads.queue import ClusterState, Usage
from workloads.queue.admit import PassResult, admit_all
from workloads.queue.capacity import build_ledger
from workloads.queue.decide import decide
from workloads.queue.fairshare import usage_now
from workloads.queue.index import QueueIndex
from workloads.queue.ordering import order
from workloads.queue.preempt import Reclaimer
from workloads.queue.tests.factory import T0, at
from workloads.queue.tests.test_property import OWNERS, PROJECTS, clusters


def _sorted_whole(state: ClusterState, now: datetime) -> tuple[PassResult, Reclaimer]:
    """The decision made without the index: every waiting job sorted, then admitted."""
    s = state.settings
    usage = usage_now(state.usage, state.running, now, s.half_life_hours, s.slices_per_gpu)
    ledger = build_ledger(state, now)
    reclaimer = Reclaimer(state, now, ledger)
    return admit_all(order(state.pending, usage), ledger, usage, s.borrowing_enabled, reclaimer), reclaimer


shares = st.floats(0, 50, allow_nan=False)
usages = st.builds(
    Usage,
    as_of=st.just(T0),
    projects=st.dictionaries(st.sampled_from(PROJECTS), shares),
    users=st.dictionaries(st.tuples(st.sampled_from(PROJECTS), st.sampled_from(OWNERS)), shares),
)


@settings(max_examples=300, deadline=None)
@given(clusters(), usages, st.sets(st.integers(0, 13)))
def test_the_index_admits_blocks_and_reclaims_as_the_whole_sort_did(
    base: ClusterState, usage: Usage, held: set[int]
) -> None:
    state = replace(
        base,
        usage=usage,
        pending=tuple(replace(j, held=j.id in held) for j in base.pending),
        settings=replace(base.settings, borrowing_enabled=True),
    )
    before, reclaimed = _sorted_whole(state, at(5))
    now = decide(state, at(5))
    assert now.result.admitted == before.admitted
    assert now.result.blocks == before.blocks
    assert now.result.heads == before.heads
    assert (now.reclaimer.preempt, now.reclaimer.notices) == (reclaimed.preempt, reclaimed.notices)


def test_the_index_kept_between_cycles_matches_one_built_each_cycle() -> None:
    """The admission benchmark's ci trace (`bench` B3) replayed twice: with the replay's kept index,
    and with a fresh one each cycle."""
    kept = b3_admission.replay("ci", b3_admission.CYCLE_S)
    rebuilt = b3_admission.replay("ci", b3_admission.CYCLE_S, keep_queue=False)
    assert kept.admissions == rebuilt.admissions > 0
    assert kept.started == rebuilt.started
    assert kept.preemptions == rebuilt.preemptions


def test_add_and_remove_keep_each_list_in_order() -> None:
    from workloads.queue.tests.factory import job

    index = QueueIndex()
    for j in (job(3), job(1), job(2, priority=1), job(4)):
        index.add(j)
    index.remove(4)
    got = [j.id for j in next(iter(index.queues(Usage(as_of=T0)).values()))]
    assert got == [2, 1, 3]
    assert len(index) == 3
