"""Start-time estimates made at submit time against what the replay then does."""

from __future__ import annotations

import random
import statistics

from workloads.queue import ProjectQuota, Settings
from workloads.queue.replay import Replay, TraceJob
from workloads.queue.tests.factory import at, job, node


def _trace(seed: int, n: int) -> list[TraceJob]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        runtime = rng.choice([600, 1200, 1800, 3600]) * rng.uniform(0.5, 1.0)
        j = job(
            i + 1,
            rng.choice(["a", "b", "c"]),
            rng.choice(["u1", "u2"]),
            rng.choice([1, 1, 2, 4]),
            submitted_at=at(i * 180 + rng.uniform(0, 60)),
            max_runtime_s=3600,
            priority=rng.choice([0, 0, 1]),
        )
        out.append(TraceJob(j, runtime))
    return out


def test_estimates_against_replayed_trace() -> None:
    trace = _trace(7, 80)
    quotas = {p: ProjectQuota(p, gpus=6) for p in "abc"}
    nodes = [node(f"n{i}", 4, 4) for i in range(3)]
    r = Replay(trace, nodes, quotas, Settings(preemption_notice_s=0), cycle_s=None, estimate=True).run()
    assert len(r.started) == len(trace) == len(r.finished)
    errors = r.estimate_errors_s()
    waits = [r.wait_s(t.job.id) for t in trace]
    waited = [
        abs((est - r.started[jid]).total_seconds())
        for jid, est in r.estimates.items()
        if est is not None and r.wait_s(jid) > 0
    ]
    mae = statistics.mean(errors)
    print(
        f"\nestimate MAE {mae:.0f} s over {len(errors)} jobs; mean wait {statistics.mean(waits):.0f} s;"
        f" MAE among jobs that waited {statistics.mean(waited) if waited else 0:.0f} s"
    )
    assert len(errors) == len(trace)
    assert mae < 3600  # sanity: within one max runtime
