"""Hypothesis: over random clusters and queues with CPU and memory, one cycle never admits past a
project's CPU or memory quota or a node's free CPU or memory."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.queue import ClusterState, plan_cycle
from workloads.queue.tests.factory import T0
from workloads.queue.tests.test_property import clusters

SIZES = st.sampled_from([0, 500, 1_000, 4_000, 8_000])


@st.composite
def with_resources(draw: st.DrawFn) -> ClusterState:
    s = draw(clusters())
    return replace(
        s,
        pending=tuple(replace(j, cpu_millicores=draw(SIZES), memory_mib=draw(SIZES)) for j in s.pending),
        running=tuple(replace(r, cpu_millicores=draw(SIZES), memory_mib=draw(SIZES)) for r in s.running),
        nodes=tuple(
            replace(n, free_cpu_millicores=draw(st.none() | SIZES), free_memory_mib=draw(st.none() | SIZES))
            for n in s.nodes
        ),
        quotas={
            p: replace(q, cpu_millicores=draw(st.none() | SIZES), memory_mib=draw(st.none() | SIZES))
            for p, q in s.quotas.items()
        },
    )


@settings(max_examples=300, deadline=None)
@given(with_resources())
def test_a_cycle_never_admits_past_cpu_or_memory(s: ClusterState) -> None:
    by_id = {j.id: j for j in s.pending}
    admitted = [(a, by_id[a.job_id]) for a in plan_cycle(s, T0, explain=False).admit]
    for field_job, field_quota, field_node in (
        ("cpu_millicores", "cpu_millicores", "free_cpu_millicores"),
        ("memory_mib", "memory_mib", "free_memory_mib"),
    ):
        for project, quota in s.quotas.items():
            mine = [getattr(j, field_job) for _, j in admitted if j.project == project]
            limit = getattr(quota, field_quota)
            held = sum(getattr(r, field_job) for r in s.running if r.project == project)
            if limit is not None and any(mine):
                assert held + sum(mine) <= limit
        for node in s.nodes:
            free = getattr(node, field_node)
            on_node = sum(getattr(j, field_job) for a, j in admitted if a.node == node.name)
            assert free is None or on_node <= free
