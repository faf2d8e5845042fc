"""CPU and memory in admission: the project's headroom (the namespace ResourceQuota's hard lines) and
each node's free CPU and memory. A job over either waits with a sentence that gives the numbers,
instead of being admitted and then refused by the API server."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from workloads.queue import ClusterState, ProjectQuota, SharedGpu, plan_cycle
from workloads.queue.tests.factory import T0, at, job, node, running, state

Q_CPU = 16_000
Q_MEM = 131_072


def quota(project: str, gpus: int = 8, **kw: object) -> ProjectQuota:
    kw.setdefault("cpu_millicores", Q_CPU)
    kw.setdefault("memory_mib", Q_MEM)
    return ProjectQuota(project=project, gpus=gpus, **kw)  # type: ignore[arg-type]


def admitted(s: ClusterState) -> list[int]:
    return [a.job_id for a in plan_cycle(s, T0).admit]


def test_a_job_over_the_projects_cpu_headroom_waits_and_says_so() -> None:
    busy = running(100, "alpha", "n1", 1, cpu_millicores=14_000)
    s = state(
        [job(1, "alpha", cpu_millicores=8_000), job(2, "beta", cpu_millicores=8_000)],
        [node("n1", 8)],
        [quota("alpha"), quota("beta")],
        [busy],
    )
    plan = plan_cycle(s, T0)
    assert [a.job_id for a in plan.admit] == [2]
    why = plan.explanations[1]
    assert why.code == "quota_cpu"
    assert why.sentence == "waiting for CPU: needs 8000m, 2000m of 16000m free in alpha"
    assert why.numbers == {"used": 14_000, "limit": Q_CPU, "need": 8_000}


def test_a_job_over_the_projects_memory_headroom_waits_and_says_so() -> None:
    s = state(
        [job(1, "alpha", memory_mib=100_000), job(2, "alpha", memory_mib=40_000)],
        [node("n1", 8)],
        [quota("alpha")],
    )
    plan = plan_cycle(s, T0)
    assert [a.job_id for a in plan.admit] == [1]
    why = plan.explanations[2]
    assert why.code == "quota_memory"
    assert why.sentence == "waiting for memory: needs 40000 MiB, 31072 MiB of 131072 MiB free in alpha"


def test_cpu_waits_keep_the_project_queue_strict() -> None:
    s = state(
        [job(1, "alpha", cpu_millicores=20_000), job(2, "alpha", cpu_millicores=100)],
        [node("n1", 8)],
        [quota("alpha")],
    )
    plan = plan_cycle(s, T0)
    assert plan.admit == []
    assert plan.explanations[1].code == "quota_cpu"
    assert plan.explanations[2].code == "behind_head"
    assert "the first waits because waiting for CPU" in plan.explanations[2].sentence


def test_borrowing_and_grants_do_not_raise_cpu() -> None:
    """A preemptible job over its GPU quota may borrow GPUs, never CPU: the ResourceQuota's CPU line
    is the project's own."""
    over = job(1, "alpha", gpus=2, preemptible=True, cpu_millicores=Q_CPU + 1)
    fits = job(2, "beta", gpus=2, preemptible=True, cpu_millicores=Q_CPU)
    s = state([over, fits], [node("n1", 8)], [quota("alpha", gpus=1), quota("beta", gpus=1), quota("c")])
    plan = plan_cycle(s, T0)
    assert [(a.job_id, a.borrowing) for a in plan.admit] == [(2, True)]
    assert plan.explanations[1].code == "quota_cpu"
    assert plan.explanations[1].hints == ()


def test_one_cycle_never_admits_more_cpu_than_the_headroom() -> None:
    s = state([job(i, "alpha", cpu_millicores=6_000) for i in range(1, 5)], [node("n1", 8)], [quota("alpha")])
    assert admitted(s) == [1, 2]


def test_a_node_without_the_cpu_is_passed_over_for_one_that_has_it() -> None:
    """Best fit would pick n1 (fewest free GPUs that fit), but n1 has no CPU left."""
    nodes = [node("n1", 2, free_cpu_millicores=1_000), node("n2", 8, free_cpu_millicores=64_000)]
    s = state([job(1, "alpha", gpus=2, cpu_millicores=8_000)], nodes, [quota("alpha")])
    assert [a.node for a in plan_cycle(s, T0).admit] == ["n2"]


def test_no_node_with_the_gpus_has_the_cpu_free() -> None:
    nodes = [node("n1", 4, free_cpu_millicores=1_000), node("n2", 2, free_cpu_millicores=64_000)]
    s = state([job(1, "alpha", gpus=4, cpu_millicores=8_000)], nodes, [quota("alpha")])
    why = plan_cycle(s, T0).explanations[1]
    assert why.code == "node_cpu"
    assert why.sentence == "waiting for CPU: no node with 4 free GPUs has 8000m free; the most is 1000m"


def test_no_node_with_the_slices_has_the_memory_free() -> None:
    shared = (SharedGpu(index=0, free_slices=4, total_slices=4),)
    nodes = [node("n1", 0, shared=shared, free_cpu_millicores=64_000, free_memory_mib=2_048)]
    q = quota("alpha", gpus=0, slices=4)
    s = state([job(1, "alpha", gpus=0, slices=2, memory_mib=4_096)], nodes, [q])
    why = plan_cycle(s, T0).explanations[1]
    assert why.code == "node_memory"
    assert (
        why.sentence
        == "waiting for memory: no node with 2 free slices has 4096 MiB free; the most is 2048 MiB"
    )


def test_node_cpu_is_taken_as_jobs_are_admitted_in_one_cycle() -> None:
    nodes = [node("n1", 8, free_cpu_millicores=10_000)]
    s = state(
        [job(i, f"p{i}", cpu_millicores=4_000) for i in (1, 2, 3)], nodes, [quota(f"p{i}") for i in (1, 2, 3)]
    )
    plan = plan_cycle(s, T0)
    assert [a.job_id for a in plan.admit] == [1, 2]
    assert plan.explanations[3].code == "node_cpu"


def test_a_cpu_wait_gets_a_start_estimate_when_the_cpu_comes_back() -> None:
    busy = running(100, "alpha", "n1", 1, cpu_millicores=14_000, started_at=at(-600), max_runtime_s=3600)
    s = state([job(1, "alpha", cpu_millicores=8_000)], [node("n1", 8)], [quota("alpha")], [busy])
    assert plan_cycle(s, T0).explanations[1].estimated_start == at(-600) + timedelta(seconds=3600)


def test_decisions_are_unchanged_where_cpu_and_memory_do_not_bind() -> None:
    """The same queue with generous CPU and memory everywhere admits exactly what it admits without
    them: the new rule only acts where it binds."""
    pending = [job(i, "ab"[i % 2], gpus=1 + i % 3, preemptible=bool(i % 2)) for i in range(1, 13)]
    nodes = [node("n1", 4), node("n2", 2), node("n3", 8)]
    quotas = [ProjectQuota(project="a", gpus=5), ProjectQuota(project="b", gpus=3)]
    base = state(pending, nodes, quotas)
    roomy = replace(
        base,
        pending=tuple(replace(j, cpu_millicores=1_000, memory_mib=4_096) for j in pending),
        nodes=tuple(replace(n, free_cpu_millicores=10**6, free_memory_mib=10**7) for n in nodes),
        quotas={q.project: replace(q, cpu_millicores=10**6, memory_mib=10**7) for q in quotas},
    )
    plain, wide = plan_cycle(base, T0), plan_cycle(roomy, T0)
    assert plain.admit == wide.admit
    assert {k: v.code for k, v in plain.explanations.items()} == {
        k: v.code for k, v in wide.explanations.items()
    }
