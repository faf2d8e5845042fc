"""Grants per GPU type: a typed grant raises the project total and that type's limit (where the
project has one); its explanations name the type and the grant hint proposes one when the type
limit is what blocks (checked by re-planning with the suggested grant)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from workloads.queue import Grant, ProjectQuota, plan_cycle
from workloads.queue.model import ClusterState
from workloads.queue.tests.factory import at, job, node, running, state

RTX = "RTX-5090"
NODES = [node("n1", 8, gpu_type=RTX), node("n2", 8)]


def _grant(gpus: int, gpu_type: str | None = None, starts_at: datetime | None = None) -> Grant:
    return Grant(id=1, gpus=gpus, slices=0, until=at(3600), starts_at=starts_at, gpu_type=gpu_type)


def _limited(*grants: Grant, gpus: int = 8) -> ProjectQuota:
    return ProjectQuota("a", gpus=gpus, gpu_types={RTX: 2}, grants=grants)


def _typed_state(q: ProjectQuota, need: int = 2) -> ClusterState:
    return state([job(1, gpus=need, gpu_type=RTX)], NODES, [q], [running(9, "a", "n1", 2)])


def _starts(s: ClusterState, quota: ProjectQuota) -> bool:
    plan = plan_cycle(replace(s, quotas={quota.project: quota}), at(10), explain=False)
    return 1 in {a.job_id for a in plan.admit}


def test_a_typed_grant_raises_the_type_limit_and_the_total() -> None:
    blocked = plan_cycle(_typed_state(_limited()), at(10)).explanations[1]
    assert blocked.code == "quota_type"
    assert blocked.sentence == f"project limit for {RTX} 2/2 GPUs in use"
    assert [a.job_id for a in plan_cycle(_typed_state(_limited(_grant(2, RTX))), at(10)).admit] == [1]
    # Total 2 + 2 of the grant: the job's 2 fit only because the grant raised the total too.
    assert [a.job_id for a in plan_cycle(_typed_state(_limited(_grant(2, RTX), gpus=2)), at(10)).admit] == [1]


def test_an_untyped_grant_leaves_the_type_limit() -> None:
    exp = plan_cycle(_typed_state(_limited(_grant(4))), at(10)).explanations[1]
    assert exp.code == "quota_type"


def test_a_grant_of_an_unlimited_type_raises_only_the_total() -> None:
    q = ProjectQuota("a", gpus=2, grants=(_grant(2, "h200"),))
    s = state([job(1, gpus=2, gpu_type=RTX)], NODES, [q], [running(9, "a", "n1", 2)])
    assert [a.job_id for a in plan_cycle(s, at(10)).admit] == [1]  # RTX stays unlimited; total 4


def test_a_typed_grant_not_yet_started_does_not_count() -> None:
    later = _grant(2, RTX, starts_at=at(60))
    assert plan_cycle(_typed_state(_limited(later)), at(10)).admit == []


def test_the_type_sentence_names_the_typed_grant() -> None:
    exp = plan_cycle(_typed_state(_limited(_grant(1, RTX)), need=2), at(10)).explanations[1]
    assert exp.code == "quota_type"
    assert exp.sentence == f"project limit for {RTX} 2/3 GPUs in use, including a temporary grant of +1 {RTX}"
    q = ProjectQuota("a", gpus=2, grants=(_grant(2, RTX), replace(_grant(1), id=2)))
    total = state([job(1, gpus=2)], NODES, [q], [running(9, "a", "n1", 4)])
    text = plan_cycle(total, at(10)).explanations[1].sentence
    assert text == f"project quota 4/5 GPUs in use, including temporary grants of +1 and +2 {RTX}"


def test_the_hint_proposes_a_typed_grant_when_the_type_limit_blocks() -> None:
    s = _typed_state(_limited())
    exp = plan_cycle(s, at(10)).explanations[1]
    assert f"a temporary grant of +2 {RTX} would start it now" in exp.hints
    assert not any("+2 GPUs" in h for h in exp.hints)
    assert _starts(s, _limited(_grant(2, RTX)))
    assert not _starts(s, _limited(_grant(2)))


def test_the_hint_covers_the_total_and_the_type_at_once() -> None:
    """Total 4/5 and type 2/2, asking 2: the total needs +1 and the type +2, so +2 of the type."""
    s = _typed_state(_limited(gpus=5))
    s = replace(s, running=(*s.running, running(8, "a", "n2", 2)))
    exp = plan_cycle(s, at(10)).explanations[1]
    assert exp.code == "quota"
    assert (exp.numbers["type_used"], exp.numbers["type_limit"]) == (2, 2)
    assert f"a temporary grant of +2 {RTX} would start it now" in exp.hints
    assert _starts(s, _limited(_grant(2, RTX), gpus=5))
    assert not _starts(s, _limited(_grant(1, RTX), gpus=5))
    assert not _starts(s, _limited(_grant(2), gpus=5))
