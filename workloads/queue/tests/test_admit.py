from __future__ import annotations

from datetime import timedelta

from workloads.queue import Grant, ProjectQuota, SharedGpu, UserCap, plan_cycle
from workloads.queue.tests.factory import at, job, node, running, state


def test_fragmented_gpus_do_not_admit_a_four_gpu_job() -> None:
    s = state([job(1, gpus=4)], [node("n1", 2), node("n2", 2)], [ProjectQuota("a", gpus=8)])
    plan = plan_cycle(s, at(10))
    assert plan.admit == []
    exp = plan.explanations[1]
    assert exp.code == "no_node"
    assert "no node has 4 free GPUs; the largest free block is 2" in exp.sentence
    assert exp.numbers["largest"] == 2


def test_whole_gpus_on_one_node_best_fit_and_no_double_booking() -> None:
    s = state(
        [job(1, gpus=3), job(2, gpus=3), job(3, gpus=3)],
        [node("n1", 8), node("n2", 3)],
        [ProjectQuota("a", gpus=16)],
    )
    plan = plan_cycle(s, at(10))
    assert [(a.job_id, a.node) for a in plan.admit] == [(1, "n2"), (2, "n1"), (3, "n1")]


def test_gpu_type_must_match() -> None:
    s = state(
        [job(1, gpus=2, gpu_type="a100")], [node("n1", 8, gpu_type="h200")], [ProjectQuota("a", gpus=8)]
    )
    plan = plan_cycle(s, at(10))
    assert plan.admit == []
    assert plan.explanations[1].code == "unknown_type"


def test_quota_and_grants() -> None:
    base = ProjectQuota("a", gpus=2)
    s = state([job(1, gpus=2), job(2, gpus=2)], [node("n1", 8)], [base])
    assert [a.job_id for a in plan_cycle(s, at(10)).admit] == [1]
    grant = Grant(id=7, gpus=2, slices=0, until=at(3600))
    s2 = state(
        [job(1, gpus=2), job(2, gpus=2)], [node("n1", 8)], [ProjectQuota("a", gpus=2, grants=(grant,))]
    )
    assert [a.job_id for a in plan_cycle(s2, at(10)).admit] == [1, 2]
    assert [a.job_id for a in plan_cycle(s2, at(3600)).admit] == [1]  # expired


def test_blocked_project_does_not_block_others_but_is_strict_inside() -> None:
    quotas = [ProjectQuota("a", gpus=2), ProjectQuota("b", gpus=8)]
    pending = [job(1, "a", gpus=4, priority=9), job(2, "a", gpus=1), job(3, "b", gpus=4)]
    plan = plan_cycle(state(pending, [node("n1", 8)], quotas), at(10))
    assert [a.job_id for a in plan.admit] == [3]
    assert plan.explanations[2].code == "behind_head"
    assert "1 job ahead of yours: 1x 4 GPUs" in plan.explanations[2].sentence


def test_user_cap_skips_only_that_user() -> None:
    q = ProjectQuota("a", gpus=8, user_caps={"alice": UserCap(gpus=2, slices=0, jobs=5)})
    pending = [job(1, gpus=2), job(2, gpus=1), job(3, owner="carol", gpus=2)]
    plan = plan_cycle(state(pending, [node("n1", 8)], [q]), at(10))
    assert [a.job_id for a in plan.admit] == [1, 3]
    assert "your per-user cap 2/2 GPUs" in plan.explanations[2].sentence


def test_max_concurrent_jobs() -> None:
    q = ProjectQuota("a", gpus=8, max_concurrent_jobs=1)
    s = state([job(1)], [node("n1", 7)], [q], [running(9, "a", "n1", 1)])
    plan = plan_cycle(s, at(10))
    assert plan.admit == []
    assert plan.explanations[1].code == "max_jobs"


def test_held_never_admitted() -> None:
    plan = plan_cycle(state([job(1, held=True)], [node("n1", 8)], [ProjectQuota("a", gpus=8)]), at(10))
    assert plan.admit == []
    assert plan.explanations[1].sentence == "held by an operator"


def test_mps_slices_best_fit() -> None:
    shared = (SharedGpu(0, 3, 4), SharedGpu(1, 1, 4), SharedGpu(2, 2, 4))
    n = node("n1", 0, shared=shared)
    pending = [job(1, gpus=0, slices=2), job(2, gpus=0, slices=1), job(3, gpus=0, slices=4)]
    plan = plan_cycle(state(pending, [n], [ProjectQuota("a", gpus=0, slices=16)]), at(10))
    got = {a.job_id: a.slice_placement for a in plan.admit}
    assert got[1] == ((2, 2),)
    assert got[2] == ((1, 1),)
    assert 3 not in got  # only 3 slices left
    assert "no node has 4 free slices; the largest free block is 3" in plan.explanations[3].sentence


def test_expected_start_uses_running_jobs_end() -> None:
    s = state(
        [job(1, gpus=8)],
        [node("n1", 0)],
        [ProjectQuota("a", gpus=8)],
        [running(9, "b", "n1", 8, started_at=at(0), max_runtime_s=3600)],
    )
    exp = plan_cycle(s, at(10)).explanations[1]
    assert exp.estimated_start == at(0) + timedelta(seconds=3600)
    assert exp.position_project == 1
    assert exp.position_global == 1


def test_a_shared_node_serves_one_project_unless_cross_project() -> None:
    """MPS runs one server per UID (one per project): slices of another project never go beside
    them, unless the node's shared GPUs are all marked cross-project."""
    shared = (SharedGpu(0, 2, 4), SharedGpu(1, 4, 4))
    held = node("n1", 0, shared=shared, slice_tenants=(("a", 1),))
    quotas = [ProjectQuota("a", gpus=0, slices=8), ProjectQuota("b", gpus=0, slices=8)]
    pending = [job(1, project="b", owner="bea", gpus=0, slices=1), job(2, gpus=0, slices=2)]
    plan = plan_cycle(state(pending, [held], quotas), at(10))
    assert [a.job_id for a in plan.admit] == [2]  # a packs beside its own job; b waits
    assert plan.explanations[1].code == "slices_held"
    assert "hold another project's jobs" in plan.explanations[1].sentence
    open_node = node("n1", 0, shared=shared, slice_tenants=(("a", 1),), slices_cross_project=True)
    plan = plan_cycle(state(pending, [open_node], quotas), at(10))
    assert sorted(a.job_id for a in plan.admit) == [1, 2]


def test_two_projects_in_one_cycle_never_share_a_free_node() -> None:
    shared = (SharedGpu(0, 4, 4), SharedGpu(1, 4, 4))
    quotas = [ProjectQuota("a", gpus=0, slices=8), ProjectQuota("b", gpus=0, slices=8)]
    pending = [job(1, gpus=0, slices=1), job(2, project="b", owner="bea", gpus=0, slices=1)]
    two = plan_cycle(
        state(pending, [node("n1", 0, shared=shared), node("n2", 0, shared=shared)], quotas), at(10)
    )
    assert len(two.admit) == 2
    assert len({a.node for a in two.admit}) == 2  # the first admission made its node a's
    one = plan_cycle(state(pending, [node("n1", 0, shared=shared)], quotas), at(10))
    assert [a.job_id for a in one.admit] == [1]
    assert one.explanations[2].code == "slices_held"
