"""Reclaiming lent quota: a lender's job that fits its own quota but finds no node gets GPUs (or MPS
slices) back from the youngest borrowing jobs of its cohort, with notice.

Victims are chosen per node: on each node that could host the job, borrowers of the same unit
(whole-GPU borrowers for a whole-GPU job, slice borrowers for a slice job: the two never share a
GPU) are taken youngest first until the node's free GPUs (or free slices over its shared GPUs) plus
theirs cover the request; the node needing the fewest victims (then the least capacity) wins. A slice
job may spread over the shared GPUs of one node (`admit.place_slices`), so the node's sum is what
counts, whichever of its shared GPUs the victims hold. On a node whose shared GPUs serve one project
at a time (capacity.NodeCap.slices_for) every job of the other projects there must go, so such a
node is a candidate only when all of them are borrowers. A victim is first sent a `PreemptionNotice`;
it is preempted only once the notice's deadline has passed and the lender still needs it. While a
reclaim is in progress the node's free GPUs (or slices) and the cohort's idle quota are reserved for
the lender for the rest of the cycle.

A lender's job of several workers (whole GPUs) places its workers one at a time, each where it
displaces the fewest borrowers, on nodes of one GPU type; every node it would use is reserved.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from workloads.queue.admit import Block
from workloads.queue.capacity import Ledger, NodeCap
from workloads.queue.model import ClusterState, JobId, PendingJob, PreemptionNotice, RunningJob


def _amount(job: PendingJob | RunningJob) -> int:
    """What the job holds or asks, in its own unit (slices for an MPS job, else whole GPUs)."""
    return job.slices or job.gpus


def _free(node: NodeCap, job: PendingJob) -> int:
    return sum(node.slices.values()) if job.slices else node.free


def _reserve(node: NodeCap, job: PendingJob) -> None:
    """Hold the node's free capacity for the lender: whole GPUs, or slices fullest card first."""
    if not job.slices:
        node.free -= min(node.free, job.gpus)
        return
    left = job.slices
    for idx, free in sorted(node.slices.items(), key=lambda kv: (-kv[1], kv[0])):
        take = min(left, free)
        node.slices[idx] -= take
        left -= take


def _all_borrowed(node: NodeCap, job: PendingJob, group: list[RunningJob]) -> bool:
    """Every job of another project holding slices on the node is one of the borrowers `group`."""
    borrowed = Counter(r.project for r in group)
    return all(borrowed[p] >= n for p, n in node.tenants.items() if n > 0 and p != job.project)


def _hosts(job: PendingJob, node: NodeCap, victims: list[RunningJob]) -> int:
    """Workers of `job` a node hosts once `victims` go (GPUs, CPU and memory)."""
    room = (node.free + sum(r.gpus for r in victims)) // job.gpus
    for free, each, back in (
        (node.cpu, job.cpu_millicores, sum(r.cpu_millicores for r in victims)),
        (node.memory, job.memory_mib, sum(r.memory_mib for r in victims)),
    ):
        if free is not None and each:
            room = min(room, (free + back) // each)
    return room


GangPlan = tuple[dict[str, list[RunningJob]], dict[str, int]]  # node -> victims; node -> workers


def _gang_plan(
    job: PendingJob, ledger: Ledger, names: list[str], candidates: dict[str, list[RunningJob]]
) -> GangPlan | None:
    """Within nodes `names` (one GPU type): each next worker where it displaces the fewest borrowers
    (youngest first), or None when the borrowers there cannot make room for all."""
    queues = {
        n: sorted(candidates.get(n, []), key=lambda r: (r.started_at, r.id), reverse=True) for n in names
    }
    victims: dict[str, list[RunningJob]] = {}
    hosted: dict[str, int] = {}
    for _ in range(job.workers):
        step: tuple[int, str, list[RunningJob]] | None = None
        for name in names:
            node, taken, count = ledger.nodes[name], victims.get(name, []), hosted.get(name, 0)
            rest, extra = queues[name][len(taken) :], list[RunningJob]()
            room = _hosts(job, node, taken)
            while room <= count and len(extra) < len(rest):
                extra.append(rest[len(extra)])
                room = _hosts(job, node, taken + extra)
            if room > count and (step is None or (len(extra), name) < step[:2]):
                step = (len(extra), name, extra)
        if step is None:
            return None
        victims.setdefault(step[1], []).extend(step[2])
        hosted[step[1]] = hosted.get(step[1], 0) + 1
    return victims, hosted


class Reclaimer:
    def __init__(self, state: ClusterState, now: datetime, ledger: Ledger) -> None:
        self.now = now
        self.notice = timedelta(seconds=state.settings.preemption_notice_s)
        self.borrowers = [r for r in state.running if r.borrowing and _amount(r) > 0]
        self.existing = {n.job_id: n for n in state.notices}
        self.cohort = {p: ledger.limit(p).cohort for p in {r.project for r in self.borrowers}}
        self.claimed: set[JobId] = set()
        self.preempt: list[JobId] = []
        self.notices: list[PreemptionNotice] = []

    def _candidates(self, job: PendingJob, ledger: Ledger) -> dict[str, list[RunningJob]]:
        cohort = ledger.limit(job.project).cohort
        by_node: dict[str, list[RunningJob]] = {}
        for r in self.borrowers:
            if r.id in self.claimed or r.project == job.project or self.cohort[r.project] != cohort:
                continue
            if bool(r.slices) != bool(job.slices):
                continue
            old = self.existing.get(r.id)
            if old is not None and old.for_job != job.id:
                continue
            by_node.setdefault(r.node, []).append(r)
        return by_node

    def victims(self, job: PendingJob, ledger: Ledger) -> tuple[str, list[RunningJob]] | None:
        best: tuple[int, int, str, list[RunningJob]] | None = None
        need = _amount(job)
        for name, group in self._candidates(job, ledger).items():
            node = ledger.nodes.get(name)
            if node is None or not node.schedulable or job.gpu_type not in (None, node.gpu_type):
                continue
            held = job.slices and not node.slices_for(job.project)
            if held and not _all_borrowed(node, job, group):
                continue
            have, chosen = _free(node, job), []
            for r in sorted(group, key=lambda r: (r.started_at, r.id), reverse=True):
                if have >= need and not held:
                    break
                chosen.append(r)
                have += _amount(r)
            if have >= need and (best is None or (len(chosen), have, name) < best[:3]):
                best = (len(chosen), have, name, chosen)
        return (best[2], best[3]) if best else None

    def gang_victims(self, job: PendingJob, ledger: Ledger) -> GangPlan | None:
        """A job of several workers: nodes of one GPU type that host every worker once the fewest
        borrowers go (node -> its victims, maybe none), or None. Each next worker goes where it costs
        the fewest victims (youngest first); of the GPU types, the one needing the fewest victims."""
        candidates = self._candidates(job, ledger)
        by_type: dict[str, list[str]] = {}
        for name, node in ledger.nodes.items():
            if node.serves(job):
                by_type.setdefault(node.gpu_type, []).append(name)
        best: tuple[int, str, GangPlan] | None = None
        for gpu_type, names in sorted(by_type.items()):
            plan = _gang_plan(job, ledger, names, candidates)
            if plan is not None:
                count = sum(len(v) for v in plan[0].values())
                if best is None or (count, gpu_type) < best[:2]:
                    best = (count, gpu_type, plan)
        return best[2] if best else None

    def __call__(self, job: PendingJob, ledger: Ledger, blocked: Block | None = None) -> Block | None:
        if not _amount(job):
            return None
        if job.workers > 1:
            return self._reclaim_gang(job, ledger)
        found = self.victims(job, ledger)
        if found is None:
            return None
        name, chosen = found
        block = self._notify(job, chosen)
        _reserve(ledger.nodes[name], job)
        self._reserve_pool(job, ledger)
        return block

    def _reclaim_gang(self, job: PendingJob, ledger: Ledger) -> Block | None:
        plan = self.gang_victims(job, ledger)
        if plan is None or not any(plan[0].values()):
            return None
        victims, hosted = plan
        block = self._notify(job, [r for chosen in victims.values() for r in chosen])
        for name, count in hosted.items():
            node = ledger.nodes[name]
            node.free -= min(node.free, job.gpus * count)
        self._reserve_pool(job, ledger)
        return block

    def _reserve_pool(self, job: PendingJob, ledger: Ledger) -> None:
        """The cohort's idle quota stays the lender's for the rest of the cycle."""
        cohort = ledger.limit(job.project).cohort
        reserved = ledger.pool_reserved_slices if job.slices else ledger.pool_reserved
        reserved[cohort] = reserved.get(cohort, 0) + _amount(job) * job.workers

    def _notify(self, job: PendingJob, chosen: list[RunningJob]) -> Block:
        """Notice to each victim (preempted once its notice has run out); the lender's block."""
        deadline = self.now
        for r in chosen:
            self.claimed.add(r.id)
            old = self.existing.get(r.id)
            if old is None:
                old = PreemptionNotice(r.id, job.id, self.now, self.now + self.notice)
                self.notices.append(old)
            if old.deadline <= self.now:
                self.preempt.append(r.id)
            deadline = max(deadline, old.deadline)
        numbers = {
            "gpus": sum(_amount(r) for r in chosen),
            "deadline": deadline.timestamp(),
            "need": _amount(job) * job.workers,
        }
        if job.slices:
            numbers["slices"] = 1  # "gpus" holds the count, in slices (as in admit's node blocks)
        return Block("reclaiming", numbers)

    def withdrawn(self) -> list[JobId]:
        """Notices no longer needed: the lender started elsewhere, left, or the victim ended."""
        return [jid for jid in self.existing if jid not in self.claimed]
