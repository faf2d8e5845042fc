"""Jobs of several workers: one decision for all of them, the fewest nodes, never a part."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, note, settings
from hypothesis import strategies as st

from workloads.queue import ClusterState, NodeState, PendingJob, ProjectQuota, RunningJob, plan_cycle
from workloads.queue.tests.factory import at, job, node, running, state

QUOTA = ProjectQuota("a", 64)


def test_a_job_of_four_workers_waits_with_the_numbers_while_only_three_nodes_have_room() -> None:
    nodes = [node(f"n{i}", 4, 4) for i in range(3)] + [node("n3", 2, 4)]
    s = state([job(1, gpus=4, workers=4)], nodes, [QUOTA])
    plan = plan_cycle(s, at(60))
    assert plan.admit == []
    e = plan.explanations[1]
    assert (e.code, dict(e.numbers)) == ("no_node", {"need": 4, "workers": 4, "fit": 3, "nodes": 3})
    assert e.sentence.startswith("needs 4 workers with 4 free GPUs each, each worker on one node: room for 3")


def test_the_explanation_says_when_the_next_node_frees_and_whose_end_frees_it() -> None:
    nodes = [node(f"n{i}", 4, 4) for i in range(3)] + [node("n3", 0, 4), node("x1", 0, 4, gpu_type="a100")]
    mine = running(50, "a", "n3", 4, name="resnet", max_runtime_s=3600)  # ends at 12:50
    other_type = running(51, "b", "x1", 4, max_runtime_s=1200)  # ends first, on a node of another type
    s = state(
        [job(1, gpus=4, workers=4, gpu_type="h200")], nodes, [QUOTA, ProjectQuota("b", 8)], [mine, other_type]
    )
    e = plan_cycle(s, at(60)).explanations[1]
    assert e.sentence.endswith("none starts until all can; the next frees ≈ 12:50 when job resnet ends")
    assert e.numbers["frees_at"] == at(3000).timestamp()
    # Another project's job is named by its project only.
    theirs = running(52, "b", "n3", 4, name="secret-run", max_runtime_s=1800)  # ends at 12:20
    s = state([job(1, gpus=4, workers=4)], nodes, [QUOTA, ProjectQuota("b", 8)], [theirs])
    e = plan_cycle(s, at(60)).explanations[1]
    assert e.sentence.endswith("the next frees ≈ 12:20 when a job of b ends")


def test_a_lender_of_several_workers_reclaims_the_fewest_borrowers_and_keeps_the_free_node() -> None:
    quotas = [ProjectQuota("a", 8), ProjectQuota("b", 4), ProjectQuota("c", 4)]
    nodes = [node("n0", 0, 4), node("n1", 0, 4), node("n2", 4, 4)]
    lent = [
        running(50, "b", "n0", 4, borrowing=True, started_at=at(0)),
        running(51, "b", "n1", 2, borrowing=True, started_at=at(10)),
        running(52, "b", "n1", 2, borrowing=True, started_at=at(20)),
    ]
    gang = job(1, gpus=4, workers=2, submitted_at=at(0))
    small = job(2, project="c", gpus=4, submitted_at=at(5))
    s = state([gang, small], nodes, quotas, lent)
    plan = plan_cycle(s, at(100))
    # One worker fits n2 as it is; the other costs one borrower on n0, two on n1.
    assert [n.job_id for n in plan.notices if n.for_job == 1] == [50]
    # n2 stays the lender's this cycle: the small job (a lender too) reclaims on n1 instead.
    assert plan.admit == []
    assert sorted(n.job_id for n in plan.notices if n.for_job == 2) == [51, 52]
    e = plan.explanations[1]
    assert (e.code, e.numbers["gpus"], e.numbers["need"]) == ("reclaiming", 4, 8)
    due = plan_cycle(state([gang, small], nodes, quotas, lent, notices=tuple(plan.notices)), at(400))
    assert sorted(due.preempt) == [50, 51, 52]
    freed = [node("n0", 4, 4), nodes[1], nodes[2]]
    (a,) = plan_cycle(state([gang], freed, quotas, lent[1:]), at(500)).admit
    assert sorted(a.nodes) == ["n0", "n2"]


def test_a_lender_of_several_workers_reclaims_nothing_when_borrowers_cannot_make_room() -> None:
    quotas = [ProjectQuota("a", 12), ProjectQuota("b", 4)]
    nodes = [node("n0", 0, 4), node("n1", 4, 4)]
    lent = [running(50, "b", "n0", 4, borrowing=True, started_at=at(0))]
    plan = plan_cycle(state([job(1, gpus=4, workers=3)], nodes, quotas, lent), at(100))
    assert plan.notices == []
    assert plan.explanations[1].code == "no_node"


def test_when_the_fourth_node_frees_all_four_workers_are_admitted_in_one_cycle() -> None:
    nodes = [node(f"n{i}", 4, 4) for i in range(4)]
    plan = plan_cycle(state([job(1, gpus=4, workers=4)], nodes, [QUOTA]), at(60))
    (a,) = plan.admit
    assert sorted(a.nodes) == ["n0", "n1", "n2", "n3"]
    assert a.gpus == 4
    assert a.node == a.nodes[0]
    assert plan.explanations[1].sentence == "starting now on n0, n1, n2, n3"


def test_workers_take_the_fewest_nodes_and_the_last_one_fits_tightest() -> None:
    nodes = [node("big", 8, 8), node("roomy", 6, 8), node("tight", 2, 8)]
    plan = plan_cycle(state([job(1, gpus=2, workers=5)], nodes, [QUOTA]), at(60))
    (a,) = plan.admit
    # big holds 4 workers; the fifth goes to the node with the least room that still holds it.
    assert Counter(a.nodes) == Counter({"big": 4, "tight": 1})


def test_all_workers_share_one_gpu_type() -> None:
    nodes = [node("h1", 4, 4), node("a1", 4, 4, gpu_type="a100"), node("a2", 4, 4, gpu_type="a100")]
    plan = plan_cycle(state([job(1, gpus=4, workers=2)], nodes, [QUOTA]), at(60))
    (a,) = plan.admit
    assert sorted(a.nodes) == ["a1", "a2"]


def test_the_quota_counts_every_worker() -> None:
    nodes = [node(f"n{i}", 4, 4) for i in range(4)]
    plan = plan_cycle(state([job(1, gpus=4, workers=4)], nodes, [ProjectQuota("a", 12)]), at(60))
    assert plan.admit == []
    assert dict(plan.explanations[1].numbers) == {"used": 0, "limit": 12, "need": 16, "grants": 0}


def test_a_running_job_of_several_workers_holds_quota_for_all_and_frees_every_node_in_the_estimate() -> None:
    nodes = [node(f"n{i}", 0, 4) for i in range(2)]
    held = running(50, "a", "n0", 4, workers=2, nodes=("n0", "n1"), max_runtime_s=600)
    over = plan_cycle(state([job(1, gpus=4, workers=2)], nodes, [ProjectQuota("a", 12)], [held]), at(0))
    assert dict(over.explanations[1].numbers) == {"used": 8, "limit": 12, "need": 8, "grants": 0}
    s = state([job(1, gpus=4, workers=2)], nodes, [ProjectQuota("a", 16)], [held])
    e = plan_cycle(s, at(0)).explanations[1]
    assert e.code == "no_node"
    # It started 600 s ago with 600 s to run: both of its nodes free now, so the job can start then.
    assert e.estimated_start == at(0)


def test_fewer_workers_is_hinted_when_it_would_start_now() -> None:
    nodes = [node(f"n{i}", 4, 4) for i in range(3)]
    plan = plan_cycle(state([job(1, gpus=4, workers=4)], nodes, [QUOTA]), at(60))
    assert plan.explanations[1].hints == ("asking 3 workers would start now",)


PROJECTS = ["p0", "p1"]


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    nodes = [
        NodeState(
            f"n{i}",
            draw(st.sampled_from(["h200", "a100"])),
            draw(st.integers(0, 4)),
            4,
            (),
            draw(st.booleans()) or i == 0,
            free_cpu_millicores=draw(st.sampled_from([None, 4000, 16000])),
        )
        for i in range(draw(st.integers(1, 6)))
    ]
    quotas = [ProjectQuota(p, draw(st.integers(0, 16)), cohort="c") for p in PROJECTS]
    names = [n.name for n in nodes]
    running_jobs = []
    for i in range(draw(st.integers(0, 3))):
        workers = draw(st.integers(1, 3))
        placed = tuple(draw(st.sampled_from(names)) for _ in range(workers))
        running_jobs.append(
            RunningJob(
                100 + i,
                draw(st.sampled_from(PROJECTS)),
                "bob",
                placed[0],
                at(-draw(st.integers(1, 999))),
                gpus=draw(st.integers(1, 2)),
                workers=workers,
                nodes=placed if workers > 1 else (),
                borrowing=draw(st.booleans()),
                preemptible=True,
            )
        )
    pending = [
        PendingJob(
            i,
            draw(st.sampled_from(PROJECTS)),
            "alice",
            at(i),
            gpus=draw(st.integers(0, 4)),
            workers=draw(st.sampled_from([1, 1, 2, 3, 4])),
            gpu_type=draw(st.sampled_from([None, "h200"])),
            preemptible=draw(st.booleans()),
            cpu_millicores=draw(st.sampled_from([0, 2000, 8000])),
        )
        for i in range(draw(st.integers(0, 10)))
    ]
    return state(pending, nodes, quotas, running_jobs)


@settings(max_examples=300, deadline=None, print_blob=True)
@given(clusters())
def test_a_cycle_never_admits_part_of_a_job_nor_more_than_a_node_or_a_quota_holds(s: ClusterState) -> None:
    note(f"the cluster: {s!r}")
    plan = plan_cycle(s, at(60))
    jobs = {j.id: j for j in s.pending}
    by_name = {n.name: n for n in s.nodes}
    free = {n.name: n.free_gpus for n in s.nodes}
    cpu = {n.name: n.free_cpu_millicores for n in s.nodes}
    used = Counter({p: 0 for p in PROJECTS})
    for r in s.running:
        used[r.project] += r.gpus * r.workers
    own = Counter(used)
    for a in plan.admit:
        j = jobs[a.job_id]
        placed = a.nodes or (a.node,)
        assert len(placed) == j.workers, "a job started with fewer workers than it asked for"
        assert a.node == placed[0]
        assert len({by_name[n].gpu_type for n in placed}) == 1, "workers on GPUs of several types"
        for name in placed:
            assert by_name[name].schedulable
            assert j.gpu_type in (None, by_name[name].gpu_type)
            free[name] -= j.gpus
            if cpu[name] is not None:
                cpu[name] = int(cpu[name] or 0) - j.cpu_millicores
        used[j.project] += j.total_gpus
        if not a.borrowing:
            own[j.project] += j.total_gpus
            assert own[j.project] <= s.quotas[j.project].gpus or not j.total_gpus
    assert all(v >= 0 for v in free.values()), "a node was over-booked"
    assert all(v is None or v >= 0 for v in cpu.values()), "a node's CPU was over-booked"
    if any(a.borrowing for a in plan.admit):
        assert sum(used.values()) <= sum(q.gpus for q in s.quotas.values())
    for e in plan.explanations.values():
        if e.code == "no_node" and "workers" in e.numbers:
            assert e.numbers["fit"] < e.numbers["workers"]


def test_with_as_few_nodes_workers_go_under_one_switch() -> None:
    nodes = [node("n1", 4, 4, switch="s1"), node("n2", 4, 4, switch="s2"), node("n3", 4, 4, switch="s1")]
    plan = plan_cycle(state([job(1, gpus=4, workers=2)], nodes, [QUOTA]), at(60))
    (a,) = plan.admit
    assert sorted(a.nodes) == ["n1", "n3"]
    # Fewer nodes win over one switch: two workers fit on the roomy node of the other switch.
    roomy = [*nodes, node("n4", 8, 8, switch="s2")]
    (b,) = plan_cycle(state([job(1, gpus=4, workers=2)], roomy, [QUOTA]), at(60)).admit
    assert b.nodes == ("n4", "n4")


def test_after_the_wait_nodes_are_held_for_a_job_of_several_workers_as_they_free_up() -> None:
    from workloads.queue import Settings

    # Four nodes half busy; another project's 1-GPU jobs, ordered first, would take every GPU freed.
    nodes = [node(f"n{i}", 2, 4) for i in range(4)]
    quotas = [QUOTA, ProjectQuota("b", 64)]
    gang = job(1, gpus=4, workers=4, submitted_at=at(0))
    small = [job(10 + i, project="b", gpus=1, priority=1, submitted_at=at(100 + i)) for i in range(4)]
    settings = Settings(workers_hold_after_s=600)

    early = plan_cycle(state([gang, *small], nodes, quotas, settings=settings), at(300))
    assert sorted(a.job_id for a in early.admit) == [10, 11, 12, 13]
    assert early.held == {}

    late = plan_cycle(state([gang, *small], nodes, quotas, settings=settings), at(700))
    assert late.admit == []
    assert late.held == {f"n{i}": 1 for i in range(4)}
    e = late.explanations[1]
    assert e.held == ("n0", "n1", "n2", "n3")
    assert e.sentence.endswith("after 11 min waiting, n0, n1, n2, n3 are held for it as they free up")
    assert late.explanations[10].code == "no_node"

    # Nodes it would never fit are not held, nor are any while its quota would not admit it.
    never = plan_cycle(
        state([gang, *small], nodes, [ProjectQuota("a", 8), quotas[1]], settings=settings), at(700)
    )
    assert never.held == {}
    assert len(never.admit) == 4
