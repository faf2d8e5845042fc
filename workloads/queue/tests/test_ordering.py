from __future__ import annotations

from datetime import timedelta

from workloads.queue import Usage, plan_cycle
from workloads.queue.fairshare import UsageRecord, decay_factor, decayed, fold
from workloads.queue.model import ProjectQuota
from workloads.queue.ordering import order
from workloads.queue.tests.factory import T0, at, job, node, state


def test_priority_beats_fair_share_beats_submit_time() -> None:
    usage = Usage(as_of=T0, projects={"heavy": 100.0, "light": 1.0})
    jobs = [
        job(1, "light", submitted_at=at(1)),
        job(2, "heavy", submitted_at=at(0)),
        job(3, "heavy", priority=2, submitted_at=at(5)),
        job(4, "light", submitted_at=at(0)),
    ]
    assert [j.id for j in order(jobs, usage)] == [3, 4, 1, 2]


def test_front_goes_first_within_its_priority_only() -> None:
    jobs = [job(1), job(2, front=True), job(3, priority=5)]
    assert [j.id for j in order(jobs, Usage(as_of=T0))] == [3, 2, 1]


def test_heavy_past_user_waits_behind_light_one() -> None:
    past = [UsageRecord("heavy", "h", 500.0, T0 - timedelta(hours=24))]
    usage = decayed(past, T0, half_life_hours=168)
    quotas = [ProjectQuota("heavy", gpus=8), ProjectQuota("light", gpus=8)]
    pending = [job(1, "heavy", gpus=8, submitted_at=at(0)), job(2, "light", gpus=8, submitted_at=at(60))]
    plan = plan_cycle(state(pending, [node("n1", 8)], quotas, usage=usage), at(120))
    assert [a.job_id for a in plan.admit] == [2]
    assert plan.explanations[1].code == "no_node"


def test_decay_halves_each_half_life() -> None:
    assert decay_factor(T0, T0 + timedelta(hours=10), 10) == 0.5
    rec = [UsageRecord("p", "u", 8.0, T0)]
    u = fold(decayed(rec, T0, 10), [], T0 + timedelta(hours=20), 10)
    assert abs(u.projects["p"] - 2.0) < 1e-9
    assert abs(u.users[("p", "u")] - 2.0) < 1e-9
