"""Explanation texts carry the numbers; every "would start sooner" hint is checked by re-planning."""

from __future__ import annotations

from dataclasses import replace

from workloads.queue import ClusterState, Grant, PendingJob, ProjectQuota, UserCap, plan_cycle
from workloads.queue.tests.factory import at, job, node, running, state


def _replan_starts(s: ClusterState, changed: PendingJob, quota: ProjectQuota | None = None) -> bool:
    pending = tuple(changed if j.id == changed.id else j for j in s.pending)
    quotas = dict(s.quotas)
    if quota is not None:
        quotas[quota.project] = quota
    plan = plan_cycle(replace(s, pending=pending, quotas=quotas), at(10), explain=False)
    return changed.id in {a.job_id for a in plan.admit}


def test_quota_full_sentence_and_grant_hint() -> None:
    q = ProjectQuota("a", gpus=8)
    s = state([job(1, gpus=2)], [node("n1", 2)], [q], [running(9, "a", "n0", 8)])
    exp = plan_cycle(s, at(10)).explanations[1]
    assert exp.code == "quota"
    assert "project quota 8/8 GPUs in use" in exp.sentence
    assert exp.numbers == {"used": 8, "limit": 8, "need": 2, "grants": 0}
    assert "a temporary grant of +2 GPUs would start it now" in exp.hints
    grant = Grant(id=1, gpus=2, slices=0, until=at(3600))
    assert _replan_starts(s, s.pending[0], replace(q, grants=(grant,)))


def test_shrink_hint_is_true() -> None:
    s = state([job(1, gpus=4)], [node("n1", 2), node("n2", 2)], [ProjectQuota("a", gpus=8)])
    exp = plan_cycle(s, at(10)).explanations[1]
    assert "asking 2 GPUs would start now" in exp.hints
    assert _replan_starts(s, replace(s.pending[0], gpus=2))
    assert not _replan_starts(s, replace(s.pending[0], gpus=3))


def test_user_cap_sentence_and_hint() -> None:
    q = ProjectQuota("a", gpus=8, user_caps={"alice": UserCap(gpus=2, slices=0, jobs=9)})
    s = state([job(1, gpus=2)], [node("n1", 8)], [q], [running(9, "a", "n0", 1, owner="alice")])
    exp = plan_cycle(s, at(10)).explanations[1]
    assert "your per-user cap 1/2 GPUs" in exp.sentence
    assert "asking 1 GPU would start now" in exp.hints
    assert _replan_starts(s, replace(s.pending[0], gpus=1))


def test_jobs_ahead_with_sizes_and_positions() -> None:
    pending = [job(1, gpus=4), job(2, gpus=4), job(3, gpus=1), job(4, gpus=2)]
    s = state(pending, [node("n1", 0)], [ProjectQuota("a", gpus=16)], [running(9, "b", "n1", 8)])
    plan = plan_cycle(s, at(10))
    exp = plan.explanations[4]
    assert exp.sentence.startswith("3 jobs ahead of yours: 2x 4 GPUs, 1x 1 GPU")
    assert "the first waits because no node has 4 free GPUs" in exp.sentence
    assert (exp.position_project, exp.position_global) == (4, 4)
    assert exp.ahead == ((4, 2), (1, 1))
    assert exp.estimated_start is not None
    assert exp.estimated_start >= at(3000)


def test_any_type_hint() -> None:
    s = state(
        [job(1, gpus=2, gpu_type="a100")],
        [node("n1", 0, gpu_type="a100"), node("n2", 8)],
        [ProjectQuota("a", gpus=8)],
    )
    exp = plan_cycle(s, at(10)).explanations[1]
    assert "accepting any GPU type would start it now" in exp.hints
    assert _replan_starts(s, replace(s.pending[0], gpu_type=None))
