"""B3: admission decisions on Kueue's baseline trace (kubernetes-sigs/kueue
test/performance/scheduler/configs/baseline/generator.yaml).

Trace: 5 cohorts x 6 queues (projects), nominal quota 20 each; per queue 350 small (1 GPU, 200 ms,
priority 50, one every 100 ms), 100 medium (5 GPUs, 500 ms, priority 100, every 500 ms), 50 large
(20 GPUs, 1 s, priority 200, every 1.2 s): 15,000 workloads (full), a tenth of each set (ci). All
are preemptible so they may borrow inside their cohort as Kueue's do. Kueue has no nodes; here the
cluster is 30 nodes x 20 GPUs (= the summed quota, 600), so a large workload fills one node. Demand
(39,600 GPU-s arriving in 60 s) exceeds capacity (600 GPUs).

backend "sim": both runs are the discrete-event replay in workloads/queue/replay.py with the same
policy. "ours" decides on a 50 ms grid offset from the arrivals (the controller batches watch
events), "reference" decides at every event instant with no delay (the ideal). Decision-loop
speed times `plan_cycle` itself.

`run` also replays the trace with every tenth workload of each class a job of several workers, of
about the same GPUs (small: 2 workers x 1 GPU; medium: 5 x 1; large: 4 x 5), all admitted at once or
not at all: its makespan against the ideal replay of the same trace, and its admissions per second
against the single-worker trace's in the same run.

`run_sizes` (`python -m bench B3 --sizes`) replays the trace cut to three sizes, every per-queue count
divided by each of STEPS[profile]: 1,500 / 4,950 / 15,000 workloads (full), 300 / 600 / 1,500 (ci).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from bench.common import Profile, Result, log, percentile
from workloads.queue import NodeState, PendingJob, ProjectQuota, Settings
from workloads.queue.replay import Replay, ReplayResult, TraceJob

T0 = datetime(2026, 11, 30, tzinfo=UTC)
CLASSES = {  # name: (count per queue, interval s, gpus, runtime s, priority)
    "small": (350, 0.1, 1, 0.2, 50),
    "medium": (100, 0.5, 5, 0.5, 100),
    "large": (50, 1.2, 20, 1.0, 200),
}
# The multi-worker variant: every MULTI_EVERY-th workload of a class is (workers, GPUs each).
MULTI = {"small": (2, 1), "medium": (5, 1), "large": (4, 5)}
MULTI_EVERY = 10
COHORTS, QUEUES, QUOTA = 5, 6, 20
CYCLE_S = 0.05
KUEUE_WALL_S, KUEUE_USAGE = 351.0, 58.7
# Divisors of Kueue's per-queue counts: the profile's one size, and run_sizes' three steps (a tenth,
# about a third, all: sizes spread over a decade so a cost that is not linear shows).
SCALE: dict[Profile, int] = {"ci": 10, "full": 1}
STEPS: dict[Profile, tuple[int, ...]] = {"ci": (50, 25, 10), "full": (10, 3, 1)}


def trace(
    profile: Profile, scale: int | None = None, *, multi: bool = False
) -> tuple[list[TraceJob], dict[int, str]]:
    scale = scale or SCALE[profile]
    jobs, klass, jid = [], {}, 0
    for c in range(COHORTS):
        for q in range(QUEUES):
            for name, (count, every, gpus, runtime, prio) in CLASSES.items():
                for k in range(count // scale):
                    jid += 1
                    at = T0 + timedelta(seconds=k * every)
                    workers, each = MULTI[name] if multi and k % MULTI_EVERY == 0 else (1, gpus)
                    job = PendingJob(
                        jid,
                        f"cq-{c}-{q}",
                        "runner",
                        at,
                        gpus=each,
                        workers=workers,
                        priority=prio,
                        preemptible=True,
                        max_runtime_s=max(1, int(runtime * 2)),
                    )
                    jobs.append(TraceJob(job, runtime))
                    klass[jid] = name
    return jobs, klass


def cluster() -> tuple[list[NodeState], dict[str, ProjectQuota]]:
    nodes = [NodeState(f"node-{i}", "sim", QUOTA, QUOTA) for i in range(COHORTS * QUEUES)]
    quotas = {
        f"cq-{c}-{q}": ProjectQuota(f"cq-{c}-{q}", gpus=QUOTA, cohort=f"cohort-{c}")
        for c in range(COHORTS)
        for q in range(QUEUES)
    }
    return nodes, quotas


def replay(
    profile: Profile,
    cycle_s: float | None,
    *,
    keep_queue: bool = True,
    scale: int | None = None,
    multi: bool = False,
) -> ReplayResult:
    """The grid is offset by half a cycle from the trace's 100 ms arrival grid, so every event waits
    for the controller (25 ms on average here)."""
    jobs, _ = trace(profile, scale, multi=multi)
    nodes, quotas = cluster()
    settings = Settings(preemption_notice_s=0, half_life_hours=1.0)
    return Replay(
        jobs,
        nodes,
        quotas,
        settings,
        cycle_s=cycle_s,
        history=False,
        phase_s=CYCLE_S / 2,
        keep_queue=keep_queue,
    ).run()


def _usage(r: ReplayResult) -> float:
    return 100.0 * r.gpu_seconds / (COHORTS * QUEUES * QUOTA * r.makespan_s(T0))


def run(profile: Profile) -> Iterator[Result]:
    yield from measure(profile, SCALE[profile], sized=False)
    yield from measure_multi(profile)


def measure_multi(profile: Profile) -> Iterator[Result]:
    """The trace with a tenth of it jobs of several workers: makespan against its ideal replay,
    admissions per second against the single-worker trace's (both measured here)."""
    scale = SCALE[profile]
    jobs, _ = trace(profile, scale, multi=True)
    several = sum(1 for j in jobs if j.job.workers > 1)
    ideal = replay(profile, None, scale=scale, multi=True)
    # Decision time is the fastest of three replays each, alternated, so both see the same machine.
    runs = [replay(profile, CYCLE_S, scale=scale, multi=m) for _ in range(3) for m in (True, False)]
    ours = min(runs[0::2], key=lambda r: r.decision_s)
    single = min(runs[1::2], key=lambda r: r.decision_s)
    log(
        f"B3 multi-worker ({several} of {len(jobs)}): makespan {ours.makespan_s(T0):.2f} s "
        f"(ideal {ideal.makespan_s(T0):.2f} s), {ours.preemptions} preempted"
    )

    def res(metric: str, a: float, b: float, goal: str, ok: bool) -> Result:
        return Result("B3", profile, "sim", metric, a, b, goal, ok, f"multi-worker={several}")

    ratio = ours.makespan_s(T0) / ideal.makespan_s(T0)
    yield res("makespan_s", ours.makespan_s(T0), ideal.makespan_s(T0), "<= 1.05x ideal", ratio <= 1.05)
    rate = ours.admissions / ours.decision_s if ours.decision_s else float("inf")
    base = single.admissions / single.decision_s if single.decision_s else float("inf")
    yield res("admissions_per_s", rate, base, ">= 0.5x the single-worker trace's", rate >= 0.5 * base)
    yield res("admissions_per_s_floor", rate, 2000.0, ">= 2,000 admissions/s", rate >= 2000.0)


def run_sizes(profile: Profile) -> Iterator[Result]:
    for scale in STEPS[profile]:
        yield from measure(profile, scale, sized=True)


def measure(profile: Profile, scale: int, *, sized: bool) -> Iterator[Result]:
    """Every metric at one size; `sized` labels the lines with it (a run_sizes step)."""
    _, klass = trace(profile, scale)
    size = f"workloads={len(klass)}" if sized else ""
    ideal = replay(profile, None, scale=scale)
    log(
        f"B3 {size or profile} ideal: makespan {ideal.makespan_s(T0):.2f} s, {ideal.cycles} cycles, "
        f"{ideal.preemptions} preempted"
    )
    ours = replay(profile, CYCLE_S, scale=scale)
    log(f"B3 ours: makespan {ours.makespan_s(T0):.2f} s, {ours.cycles} cycles, {ours.preemptions} preempted")

    def res(metric: str, a: float, b: float, goal: str, ok: bool) -> Result:
        return Result("B3", profile, "sim", metric, a, b, goal, ok, size)

    ratio = ours.makespan_s(T0) / ideal.makespan_s(T0)
    yield res("makespan_s", ours.makespan_s(T0), ideal.makespan_s(T0), "<= 1.05x ideal", ratio <= 1.05)
    yield res(
        "makespan_vs_kueue_s",
        ours.makespan_s(T0),
        KUEUE_WALL_S,
        "<= 0.9x Kueue's 351 s",
        ours.makespan_s(T0) <= 0.9 * KUEUE_WALL_S,
    )
    yield res("gpu_usage_pct", _usage(ours), KUEUE_USAGE, ">= 60 %", _usage(ours) >= 60.0)
    for name in CLASSES:
        for pct in (50, 99):
            mine = [ours.wait_s(j) for j, k in klass.items() if k == name]
            ref = [ideal.wait_s(j) for j, k in klass.items() if k == name]
            yield res(f"tta_{name}_p{pct}_s", percentile(mine, pct), percentile(ref, pct), "report", True)
    rate = ours.admissions / ours.decision_s if ours.decision_s else float("inf")
    yield res("admissions_per_s", rate, 2000.0, ">= 2,000 admissions/s", rate >= 2000.0)
