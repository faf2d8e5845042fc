"""A discrete-event replay: runs `plan_cycle` over time on a trace, jobs finishing at their actual
runtimes. Used by the estimate-accuracy test and the admission benchmark.

`cycle_s=None` is the ideal loop: a decision at every event instant with no delay. Otherwise the loop
decides on a grid of `cycle_s` seconds, at the first tick after something changed (arrival, finish,
notice deadline), which is how the portal's controller batches events. Preempted jobs go back to the
front of their queue and restart from scratch.
"""

from __future__ import annotations

import heapq
import math
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from workloads.queue.fairshare import UsageRecord, fold, gpu_equivalent
from workloads.queue.index import QueueIndex
from workloads.queue.model import (
    Admission,
    ClusterState,
    JobId,
    NodeState,
    PendingJob,
    PreemptionNotice,
    ProjectQuota,
    RunningJob,
    Settings,
    SharedGpu,
    Usage,
)
from workloads.queue.plan import plan_cycle


@dataclass(frozen=True)
class TraceJob:
    job: PendingJob
    runtime_s: float


@dataclass
class ReplayResult:
    submitted: dict[JobId, datetime] = field(default_factory=dict)
    started: dict[JobId, datetime] = field(default_factory=dict)
    finished: dict[JobId, datetime] = field(default_factory=dict)
    estimates: dict[JobId, datetime | None] = field(default_factory=dict)
    gpu_seconds: float = 0.0
    decision_s: float = 0.0
    cycles: int = 0
    admissions: int = 0
    preemptions: int = 0
    notices: int = 0

    def makespan_s(self, origin: datetime) -> float:
        return max(((t - origin).total_seconds() for t in self.finished.values()), default=0.0)

    def wait_s(self, job_id: JobId) -> float:
        return (self.started[job_id] - self.submitted[job_id]).total_seconds()

    def estimate_errors_s(self) -> list[float]:
        return [
            abs((est - self.started[jid]).total_seconds())
            for jid, est in self.estimates.items()
            if est is not None and jid in self.started
        ]


@dataclass
class _Run:
    job: RunningJob
    end: datetime


class Replay:
    def __init__(
        self,
        trace: Sequence[TraceJob],
        nodes: Sequence[NodeState],
        quotas: Mapping[str, ProjectQuota],
        settings: Settings,
        *,
        cycle_s: float | None,
        estimate: bool = False,
        history: bool = True,
        phase_s: float = 0.0,
        keep_queue: bool = True,
    ) -> None:
        self.arrivals = sorted(trace, key=lambda t: (t.job.submitted_at, t.job.id))
        self.runtime = {t.job.id: t.runtime_s for t in trace}
        self.original = {t.job.id: t.job for t in trace}
        self.nodes = {n.name: n for n in nodes}
        self.quotas, self.settings = quotas, settings
        self.cycle_s, self.estimate, self.history = cycle_s, estimate, history
        self.phase_s = phase_s  # grid offset: ticks at origin + phase + k * cycle_s
        self.pending: dict[JobId, PendingJob] = {}
        self.queue = QueueIndex()  # self.pending in queue order, kept between cycles
        self.keep_queue = keep_queue  # False: the policy builds its index every cycle (the check)
        self.running: dict[JobId, _Run] = {}
        self.notices: dict[JobId, PreemptionNotice] = {}
        self.ends: list[tuple[datetime, JobId]] = []
        self.runtimes: dict[str, list[float]] = {}
        first = self.arrivals[0].job.submitted_at if self.arrivals else datetime(2000, 1, 1, tzinfo=UTC)
        self.usage = Usage(as_of=first)
        self.out = ReplayResult()
        self.kick = False  # a preemption freed GPUs: decide again right away

    def _node_states(self) -> tuple[NodeState, ...]:
        used: dict[str, int] = {}
        sliced: dict[tuple[str, int], int] = {}
        tenants: dict[str, Counter[str]] = {}
        for r in self.running.values():
            for node in r.job.nodes or (r.job.node,):
                used[node] = used.get(node, 0) + r.job.gpus
            for idx, n in r.job.slice_placement:
                sliced[(r.job.node, idx)] = sliced.get((r.job.node, idx), 0) + n
            if r.job.slices:
                tenants.setdefault(r.job.node, Counter())[r.job.project] += 1
        return tuple(
            replace(
                n,
                free_gpus=n.free_gpus - used.get(n.name, 0),
                shared=tuple(
                    SharedGpu(s.index, s.free_slices - sliced.get((n.name, s.index), 0), s.total_slices)
                    for s in n.shared
                ),
                slice_tenants=tuple(sorted(tenants.get(n.name, {}).items())),
            )
            for n in self.nodes.values()
        )

    def _state(self) -> ClusterState:
        hist = {(p, ""): statistics.median(v) for p, v in self.runtimes.items()} if self.history else {}
        return ClusterState(
            pending=tuple(self.pending.values()),
            running=tuple(r.job for r in self.running.values()),
            nodes=self._node_states(),
            quotas=self.quotas,
            usage=self.usage,
            settings=self.settings,
            notices=tuple(self.notices.values()),
            expected_runtime_s=hist,
        )

    def _finish_until(self, now: datetime) -> bool:
        changed, records = False, []
        while self.ends and self.ends[0][0] <= now:
            end, jid = heapq.heappop(self.ends)
            run = self.running.get(jid)
            if run is None or run.end != end:
                continue  # preempted earlier
            del self.running[jid]
            self.notices.pop(jid, None)
            self.out.finished[jid] = end
            secs = (end - run.job.started_at).total_seconds()
            self.runtimes.setdefault(run.job.project, []).append(secs)
            size = run.job.workers * gpu_equivalent(
                run.job.gpus, run.job.slices, self.settings.slices_per_gpu
            )
            records.append(UsageRecord(run.job.project, run.job.owner, size * secs / 3600, end))
            changed = True
        if records:
            self.usage = fold(self.usage, records, now, self.settings.half_life_hours)
        return changed

    def _arrive_until(self, now: datetime, cursor: int) -> int:
        while cursor < len(self.arrivals) and self.arrivals[cursor].job.submitted_at <= now:
            job = self.arrivals[cursor].job
            self.pending[job.id] = job
            self.queue.add(job)
            self.out.submitted[job.id] = job.submitted_at
            cursor += 1
        return cursor

    def _start(self, adm: Admission, now: datetime) -> None:
        job = self.pending.pop(adm.job_id)
        self.queue.remove(job.id)
        end = now + timedelta(seconds=self.runtime[job.id])
        rj = RunningJob(
            id=job.id,
            project=job.project,
            owner=job.owner,
            node=adm.node,
            started_at=now,
            gpus=adm.gpus,
            slices=job.slices,
            gpu_type=job.gpu_type,
            max_runtime_s=job.max_runtime_s,
            borrowing=adm.borrowing,
            preemptible=job.preemptible,
            slice_placement=adm.slice_placement,
            workers=job.workers,
            nodes=adm.nodes,
        )
        self.running[job.id] = _Run(rj, end)
        heapq.heappush(self.ends, (end, job.id))
        self.out.started.setdefault(job.id, now)
        self.out.admissions += 1
        size = job.workers * gpu_equivalent(adm.gpus, job.slices, self.settings.slices_per_gpu)
        self.out.gpu_seconds += size * self.runtime[job.id]

    def _preempt(self, jid: JobId, now: datetime) -> None:
        run = self.running.pop(jid)
        self.notices.pop(jid, None)
        left = (run.end - now).total_seconds()
        size = run.job.workers * gpu_equivalent(run.job.gpus, run.job.slices, self.settings.slices_per_gpu)
        self.out.gpu_seconds -= size * left
        self.pending[jid] = replace(self.original[jid], front=True)
        self.queue.add(self.pending[jid])
        self.out.started.pop(jid, None)
        self.out.preemptions += 1

    def cycle(self, now: datetime, fresh: list[JobId]) -> None:
        state = self._state()
        explain = self.estimate and bool(fresh)
        t0 = time.perf_counter()
        plan = plan_cycle(state, now, explain=explain, queue=self.queue if self.keep_queue else None)
        self.out.decision_s += time.perf_counter() - t0 if not explain else 0.0
        self.out.cycles += 1
        for jid in fresh:
            exp = plan.explanations.get(jid)
            self.out.estimates[jid] = exp.estimated_start if exp else None
        self.kick = bool(plan.preempt)
        for jid in plan.preempt:
            self._preempt(jid, now)
        for adm in plan.admit:
            self._start(adm, now)
        for jid in plan.withdraw:
            self.notices.pop(jid, None)
        for n in plan.notices:
            self.notices[n.job_id] = n
            self.out.notices += 1

    def _next_event(self, cursor: int, now: datetime) -> datetime | None:
        times = [self.ends[0][0]] if self.ends else []
        if cursor < len(self.arrivals):
            times.append(self.arrivals[cursor].job.submitted_at)
        times += [n.deadline for n in self.notices.values() if n.deadline > now]
        if self.kick:
            times.append(now)
        return min(times) if times else None

    def _tick(self, at: datetime, origin: datetime) -> datetime:
        if self.cycle_s is None:
            return at
        k = math.ceil(((at - origin).total_seconds() - self.phase_s) / self.cycle_s - 1e-9)
        return origin + timedelta(seconds=self.phase_s + k * self.cycle_s)

    def run(self, max_cycles: int = 10_000_000) -> ReplayResult:
        if not self.arrivals:
            return self.out
        origin = self.arrivals[0].job.submitted_at
        now, cursor = origin, 0
        for _ in range(max_cycles):
            self._finish_until(now)
            before = set(self.pending)
            cursor = self._arrive_until(now, cursor)
            self.cycle(now, [j for j in self.pending if j not in before])
            nxt = self._next_event(cursor, now)
            if nxt is None:
                break
            now = max(self._tick(nxt, origin), now + timedelta(microseconds=1))
        return self.out
