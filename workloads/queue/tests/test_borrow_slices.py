"""Borrowed MPS slices are reclaimed like whole GPUs: youngest slice borrowers first, with notice,
preempted after the deadline, the lender's slices reserved meanwhile (test_borrow.py for GPUs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workloads.queue import NodeState, ProjectQuota, RunningJob, Settings, SharedGpu, plan_cycle
from workloads.queue.replay import Replay, TraceJob
from workloads.queue.tests.factory import at, job, node, running, state

QUOTAS = [
    ProjectQuota("lender", gpus=0, slices=4),
    ProjectQuota("borrower", gpus=4, slices=4),
    ProjectQuota("third", gpus=0, slices=4),
]


def shared_node(name: str = "n1", free: tuple[int, ...] = (0,), **kw: Any) -> NodeState:
    """A node whose whole GPUs are all busy and whose shared GPUs (4 slices each) have `free`."""
    cards = tuple(SharedGpu(i, f, 4) for i, f in enumerate(free))
    return node(name, 0, total=len(free), shared=cards, **kw)


def slice_borrower(jid: int, slices: int, started: float, card: int = 0, **kw: Any) -> RunningJob:
    kw.setdefault("project", "borrower")
    kw.setdefault("node", "n1")
    return running(
        jid,
        gpus=0,
        slices=slices,
        borrowing=True,
        preemptible=True,
        started_at=at(started),
        slice_placement=((card, slices),),
        **kw,
    )


def test_slice_lender_gets_notice_then_preemption_after_deadline() -> None:
    borrower = slice_borrower(1, 4, 0)
    s = state([job(2, "lender", gpus=0, slices=3, submitted_at=at(100))], [shared_node()], QUOTAS, [borrower])
    plan = plan_cycle(s, at(100))
    assert plan.admit == []
    assert plan.preempt == []
    assert [(n.job_id, n.for_job, n.deadline) for n in plan.notices] == [(1, 2, at(400))]
    exp = plan.explanations[2]
    assert exp.code == "reclaiming"
    assert "waiting for 4 borrowed slices to be returned (notice ends 12:06)" in exp.sentence
    assert exp.numbers["slices"] == 1
    assert exp.estimated_start == at(400)  # the victim ends at the deadline and frees its card
    again = plan_cycle(state(s.pending, s.nodes, QUOTAS, [borrower], notices=tuple(plan.notices)), at(200))
    assert (again.preempt, again.notices, again.withdraw) == ([], [], [])
    due = plan_cycle(state(s.pending, s.nodes, QUOTAS, [borrower], notices=tuple(plan.notices)), at(400))
    assert due.preempt == [1]


def test_youngest_slice_borrowers_until_the_node_covers_the_request() -> None:
    old = slice_borrower(1, 2, 0, card=0)
    young = slice_borrower(2, 1, 50, card=1)
    younger = slice_borrower(3, 1, 60, card=1)
    s = state(
        [job(9, "lender", gpus=0, slices=3)],
        [shared_node(free=(1, 0))],
        QUOTAS,
        [old, young, younger],
        settings=Settings(preemption_notice_s=0),
    )
    plan = plan_cycle(s, at(100))
    assert sorted(plan.preempt) == [2, 3]  # 1 free + 1 + 1 covers 3; the oldest stays


def test_whole_gpu_borrowers_are_not_asked_for_slices() -> None:
    gpu_borrower = running(1, "borrower", "n1", 4, borrowing=True, preemptible=True, started_at=at(50))
    s = state([job(2, "lender", gpus=0, slices=2)], [shared_node()], QUOTAS, [gpu_borrower])
    plan = plan_cycle(s, at(100))
    assert plan.notices == []
    assert plan.explanations[2].code == "no_node"


def test_own_slices_and_other_cohorts_are_not_reclaimed() -> None:
    quotas = [*QUOTAS[:2], ProjectQuota("stranger", gpus=0, slices=4, cohort="elsewhere")]
    mine = slice_borrower(1, 2, 10, project="lender", card=0)
    foreign = slice_borrower(2, 2, 20, project="stranger", card=0)
    s = state([job(3, "lender", gpus=0, slices=2)], [shared_node()], quotas, [mine, foreign])
    assert plan_cycle(s, at(100)).notices == []


def test_slice_notice_withdrawn_when_no_longer_needed() -> None:
    borrower = slice_borrower(1, 4, 0)
    pending = [job(2, "lender", gpus=0, slices=2)]
    first = plan_cycle(state(pending, [shared_node()], QUOTAS, [borrower]), at(100))
    assert [n.job_id for n in first.notices] == [1]
    gone = plan_cycle(state([], [shared_node()], QUOTAS, [borrower], notices=tuple(first.notices)), at(150))
    assert gone.withdraw == [1]


def test_reclaimed_slices_are_reserved_for_the_lender_this_cycle() -> None:
    """The node's last free slice and the cohort's idle slices stay the lender's while the
    borrower leaves: a later job of another project (in quota, or borrowing) does not take them."""
    borrower = slice_borrower(1, 3, 0)
    lender = job(2, "lender", gpus=0, slices=4, submitted_at=at(1))
    in_quota = job(3, "third", gpus=0, slices=1, submitted_at=at(2))
    s = state([lender, in_quota], [shared_node(free=(1,))], QUOTAS, [borrower])
    plan = plan_cycle(s, at(100))
    assert [n.job_id for n in plan.notices] == [1]
    assert plan.admit == []
    assert plan.explanations[3].code == "no_node"
    # Borrowing: 12 slices in the cohort, 7 used; the lender's 4 are reserved, so 1 is idle, not 5.
    busy = running(7, "third", "n2", gpus=0, slices=4, started_at=at(0), slice_placement=((0, 4),))
    wide = job(4, "third", gpus=0, slices=3, preemptible=True, submitted_at=at(3))
    nodes = [shared_node(free=(1,)), shared_node("n2", free=(0, 3))]  # n2 fits 3, not the lender's 4
    plan2 = plan_cycle(state([lender, wide], nodes, QUOTAS, [borrower, busy]), at(100))
    assert [n.job_id for n in plan2.notices] == [1]
    exp = plan2.explanations[4]
    assert exp.code == "no_borrow"
    assert "only 1 idle slices can be borrowed (needs 3)" in exp.sentence


def test_replay_slice_borrow_reclaim_and_resume() -> None:
    borrower = job(1, "borrower", gpus=0, slices=8, preemptible=True, submitted_at=at(0), max_runtime_s=3600)
    lender = job(2, "lender", gpus=0, slices=4, submitted_at=at(100), max_runtime_s=3600)
    trace = [TraceJob(borrower, 1000), TraceJob(lender, 500)]
    quotas = {q.project: q for q in (ProjectQuota("lender", 0, 4), ProjectQuota("borrower", 0, 4))}
    r = Replay(
        trace, [shared_node(free=(4, 4))], quotas, Settings(preemption_notice_s=300), cycle_s=None
    ).run()
    assert (r.preemptions, r.notices) == (1, 1)
    ms = timedelta(milliseconds=1)
    assert abs(r.started[2] - at(400)) < ms  # the lender starts when the notice ends
    assert abs(r.started[1] - at(900)) < ms  # the borrower returns at the front after the lender
