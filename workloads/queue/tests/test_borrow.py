"""Borrow then reclaim, driven cycle by cycle through the replay (the caller's role)."""

from __future__ import annotations

from datetime import timedelta

from workloads.queue import ProjectQuota, Settings, plan_cycle
from workloads.queue.replay import Replay, TraceJob
from workloads.queue.tests.factory import at, job, node, running, state

QUOTAS = [ProjectQuota("lender", gpus=4), ProjectQuota("borrower", gpus=4)]


def test_borrower_admitted_over_quota_only_when_preemptible() -> None:
    pending = [job(1, "borrower", gpus=8, preemptible=True), job(2, "borrower", gpus=8, submitted_at=at(0))]
    plan = plan_cycle(state(pending[:1], [node("n1", 8)], QUOTAS), at(10))
    assert [(a.job_id, a.borrowing) for a in plan.admit] == [(1, True)]
    plan2 = plan_cycle(state(pending[1:], [node("n1", 8)], QUOTAS), at(10))
    assert plan2.admit == []
    assert plan2.explanations[2].code == "quota"
    assert "marking it preemptible would start it now on borrowed quota" in plan2.explanations[2].hints


def test_lender_gets_notice_then_preemption_after_deadline() -> None:
    borrower = running(1, "borrower", "n1", 8, borrowing=True, preemptible=True, started_at=at(0))
    s = state([job(2, "lender", gpus=4, submitted_at=at(100))], [node("n1", 0)], QUOTAS, [borrower])
    plan = plan_cycle(s, at(100))
    assert plan.admit == []
    assert plan.preempt == []
    assert [(n.job_id, n.for_job, n.deadline) for n in plan.notices] == [(1, 2, at(400))]
    exp = plan.explanations[2]
    assert exp.code == "reclaiming"
    assert "waiting for 8 borrowed GPUs to be returned (notice ends 12:06)" in (exp.sentence)
    assert exp.estimated_start == at(400)
    again = plan_cycle(state(s.pending, s.nodes, QUOTAS, [borrower], notices=tuple(plan.notices)), at(200))
    assert again.preempt == []
    assert again.notices == []
    due = plan_cycle(state(s.pending, s.nodes, QUOTAS, [borrower], notices=tuple(plan.notices)), at(400))
    assert due.preempt == [1]


def test_youngest_borrowers_minimal_set() -> None:
    old = running(1, "borrower", "n1", 4, borrowing=True, started_at=at(0))
    young = running(2, "borrower", "n1", 2, borrowing=True, started_at=at(50))
    younger = running(3, "borrower", "n1", 2, borrowing=True, started_at=at(60))
    s = state(
        [job(9, "lender", gpus=4)],
        [node("n1", 0)],
        QUOTAS,
        [old, young, younger],
        settings=Settings(preemption_notice_s=0),
    )
    assert sorted(plan_cycle(s, at(100)).preempt) == [2, 3]


def test_notice_withdrawn_when_no_longer_needed() -> None:
    borrower = running(1, "borrower", "n1", 8, borrowing=True, started_at=at(0))
    first = plan_cycle(state([job(2, "lender", gpus=4)], [node("n1", 0)], QUOTAS, [borrower]), at(100))
    gone = plan_cycle(state([], [node("n1", 0)], QUOTAS, [borrower], notices=tuple(first.notices)), at(150))
    assert gone.withdraw == [1]


def test_replay_borrow_reclaim_and_resume() -> None:
    trace = [
        TraceJob(job(1, "borrower", gpus=8, preemptible=True, submitted_at=at(0), max_runtime_s=3600), 1000),
        TraceJob(job(2, "lender", gpus=4, submitted_at=at(100), max_runtime_s=3600), 500),
    ]
    r = Replay(
        trace,
        [node("n1", 8)],
        {q.project: q for q in QUOTAS},
        Settings(preemption_notice_s=300),
        cycle_s=None,
    ).run()
    assert r.preemptions == 1
    assert r.notices == 1
    ms = timedelta(milliseconds=1)
    assert abs(r.started[2] - at(400)) < ms  # lender starts when the notice ends
    assert abs(r.started[1] - at(900)) < ms  # borrower back at the front, resumes after the lender
    assert abs(r.finished[1] - at(1900)) < ms
