"""Hypothesis: over random clusters and queues, one cycle never exceeds a quota, a cap or a node."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, note, settings
from hypothesis import strategies as st

from workloads.queue import (
    ClusterState,
    CyclePlan,
    NodeState,
    PendingJob,
    ProjectQuota,
    RunningJob,
    SharedGpu,
    UserCap,
    plan_cycle,
)
from workloads.queue.tests.factory import at, state

PROJECTS = ["p0", "p1", "p2"]
OWNERS = ["alice", "carol", "dave"]


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    nodes = [
        NodeState(
            f"n{i}",
            draw(st.sampled_from(["h200", "a100"])),
            draw(st.integers(0, 8)),
            8,
            tuple(SharedGpu(k, draw(st.integers(0, 4)), 4) for k in range(draw(st.integers(0, 2)))),
            draw(st.booleans()) or i == 0,
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    quotas = [
        ProjectQuota(
            p,
            draw(st.integers(0, 10)),
            draw(st.integers(0, 8)),
            draw(st.integers(1, 6)),
            draw(st.sampled_from([{}, {"h200": 3}])),
            {"alice": UserCap(draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4)))},
            cohort=draw(st.sampled_from([None, "c1"])),
        )
        for p in PROJECTS
    ]
    running = [
        RunningJob(
            100 + i,
            draw(st.sampled_from(PROJECTS)),
            "bob",
            "n0",
            at(-draw(st.integers(1, 999))),
            gpus=draw(st.integers(1, 3)),
            borrowing=draw(st.booleans()),
            preemptible=True,
        )
        for i in range(draw(st.integers(0, 4)))
    ]
    pending = [
        PendingJob(
            i,
            draw(st.sampled_from(PROJECTS)),
            draw(st.sampled_from(OWNERS)),
            at(i),
            *((draw(st.integers(1, 8)), 0) if draw(st.booleans()) else (0, draw(st.integers(1, 6)))),
            gpu_type=draw(st.sampled_from([None, "h200"])),
            priority=draw(st.integers(0, 2)),
            preemptible=draw(st.booleans()),
            front=draw(st.booleans()),
        )
        for i in range(draw(st.integers(0, 14)))
    ]
    return state(pending, nodes, quotas, running)


# print_blob: a failure prints `@reproduce_failure(...)`, which replays that exact example (one failed
# once in about 47,000 drawn, 2026-12-05, and its printed example came out empty).
@settings(max_examples=300, deadline=None, print_blob=True)
@given(clusters())
def test_cycle_never_exceeds_quota_caps_or_nodes(s: ClusterState) -> None:
    note(f"the cluster: {s!r}")
    plan = plan_cycle(s, at(1000), explain=False)
    jobs = {j.id: j for j in s.pending}
    node_free = {n.name: n.free_gpus for n in s.nodes}
    slice_free = {(n.name, g.index): g.free_slices for n in s.nodes for g in n.shared}
    used_g: Counter[str] = Counter()
    used_s: Counter[str] = Counter()
    nb_g: Counter[str] = Counter()
    jobs_n: Counter[str] = Counter()
    user: Counter[tuple[str, str, str]] = Counter()
    types: Counter[tuple[str, str]] = Counter()
    for r in s.running:
        used_g[r.project] += r.gpus
        jobs_n[r.project] += 1
    run_g = dict(used_g)
    for a in plan.admit:
        j = jobs[a.job_id]
        assert not j.held
        assert not a.borrowing or j.preemptible
        assert a.gpus == j.gpus
        node_free[a.node] -= a.gpus
        for idx, k in a.slice_placement:
            slice_free[(a.node, idx)] -= k
        assert sum(k for _, k in a.slice_placement) == j.slices
        used_g[j.project] += j.gpus
        used_s[j.project] += j.slices
        jobs_n[j.project] += 1
        if not a.borrowing:
            nb_g[j.project] += j.gpus
        if j.gpu_type or a.gpus:
            types[(j.project, next(n.gpu_type for n in s.nodes if n.name == a.node))] += a.gpus
        for unit, n in (("g", j.gpus), ("s", j.slices), ("j", 1)):
            user[(j.project, j.owner, unit)] += n
    assert all(v >= 0 for v in node_free.values()), "a node was over-booked"
    assert all(v >= 0 for v in slice_free.values()), "a shared GPU was over-booked"
    assert all(any(n.name == a.node and n.schedulable for n in s.nodes) for a in plan.admit)
    for p, q in s.quotas.items():
        if nb_g[p]:
            assert run_g.get(p, 0) + nb_g[p] <= q.gpus
        borrowed = any(a.borrowing and jobs[a.job_id].project == p for a in plan.admit)
        if not borrowed:
            assert used_s[p] <= q.slices
        if any(jobs[a.job_id].project == p for a in plan.admit):
            assert jobs_n[p] <= q.max_concurrent_jobs
        if "h200" in q.gpu_types and types[(p, "h200")]:
            assert types[(p, "h200")] <= q.gpu_types["h200"]
        cap = q.user_caps["alice"]
        assert user[(p, "alice", "g")] <= cap.gpus
        assert user[(p, "alice", "s")] <= cap.slices
        assert user[(p, "alice", "j")] <= cap.jobs
    check_cohorts(s, plan, used_g, used_s)


def check_cohorts(s: ClusterState, plan: CyclePlan, used_g: Counter[str], used_s: Counter[str]) -> None:
    """Borrowing never takes a cohort past its summed quota of what was borrowed: GPUs for a GPU job,
    slices for a slice job. (Running jobs may already hold more GPUs than the quota, after an operator
    lowered it: that does not stop a slice job borrowing idle slices.)"""
    jobs = {j.id: j for j in s.pending}
    for cohort in {q.cohort for q in s.quotas.values()}:
        members = [p for p, q in s.quotas.items() if q.cohort == cohort]
        borrowed = [jobs[a.job_id] for a in plan.admit if a.borrowing and jobs[a.job_id].project in members]
        if any(j.gpus for j in borrowed):
            assert sum(used_g[p] for p in members) <= sum(s.quotas[p].gpus for p in members)
        if any(j.slices for j in borrowed):
            assert sum(used_s[p] for p in members) <= sum(s.quotas[p].slices for p in members)


def test_a_slice_job_borrows_idle_slices_while_running_jobs_exceed_the_gpu_quota() -> None:
    """The example Hypothesis found on 2026-12-05 (shrunk by hand): p0 runs 9 GPUs on a quota of 3;
    p1's slice job borrows p2's idle slice (no cohort: one cluster-wide cohort) and p1's GPU job runs
    on p1's own quota. The cohort's GPUs (10) exceed its quota (9), but nothing was borrowed in GPUs."""
    caps = {"alice": UserCap(0, 0, 1)}
    quotas = [
        ProjectQuota("p0", 3, 0, 1, {}, caps),
        ProjectQuota("p1", 3, 0, 2, {}, caps),
        ProjectQuota("p2", 3, 1, 1, {}, caps),
    ]
    nodes = [NodeState("n0", "h200", 0, 8), NodeState("n1", "h200", 1, 8, (SharedGpu(0, 1, 4),))]
    run = [
        RunningJob(100 + i, "p0", "bob", "n0", at(-1), gpus=g, preemptible=True)
        for i, g in enumerate([3, 3, 3])
    ]
    slice_job = PendingJob(0, "p1", "carol", at(0), 0, 1, preemptible=True)
    gpu_job = PendingJob(8, "p1", "carol", at(8), 1, 0)
    s = state([slice_job, gpu_job], nodes, quotas, run)
    plan = plan_cycle(s, at(1000), explain=False)
    assert sorted((a.job_id, a.borrowing) for a in plan.admit) == [(0, True), (8, False)]
    check_cohorts(s, plan, Counter({"p0": 9, "p1": 1}), Counter({"p1": 1}))


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_every_pending_job_is_explained(s: ClusterState) -> None:
    plan = plan_cycle(s, at(1000))
    assert set(plan.explanations) == {j.id for j in s.pending}
    for e in plan.explanations.values():
        assert e.sentence
