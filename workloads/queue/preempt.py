"""Reclaiming lent quota: a lender's job that fits its own quota but finds no node gets GPUs back
from the youngest borrowing jobs of its cohort, with notice.

Victims are chosen per node: on each node that could host the job, borrowers are taken youngest
first until the node's free GPUs plus theirs cover the request; the node needing the fewest victims
(then the fewest GPUs) wins. A victim is first sent a `PreemptionNotice`; it is preempted only once
the notice's deadline has passed and the lender still needs it. While a reclaim is in progress the
node's free GPUs and the cohort's idle quota are reserved for the lender for the rest of the cycle.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workloads.queue.admit import Block
from workloads.queue.capacity import Ledger
from workloads.queue.model import ClusterState, JobId, PendingJob, PreemptionNotice, RunningJob


class Reclaimer:
    def __init__(self, state: ClusterState, now: datetime, ledger: Ledger) -> None:
        self.now = now
        self.notice = timedelta(seconds=state.settings.preemption_notice_s)
        self.borrowers = [r for r in state.running if r.borrowing and r.gpus > 0]
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
            old = self.existing.get(r.id)
            if old is not None and old.for_job != job.id:
                continue
            by_node.setdefault(r.node, []).append(r)
        return by_node

    def victims(self, job: PendingJob, ledger: Ledger) -> tuple[str, list[RunningJob]] | None:
        best: tuple[int, int, str, list[RunningJob]] | None = None
        for name, group in self._candidates(job, ledger).items():
            node = ledger.nodes.get(name)
            if node is None or not node.schedulable or job.gpu_type not in (None, node.gpu_type):
                continue
            have, chosen = node.free, []
            for r in sorted(group, key=lambda r: (r.started_at, r.id), reverse=True):
                if have >= job.gpus:
                    break
                chosen.append(r)
                have += r.gpus
            if have >= job.gpus and (best is None or (len(chosen), have, name) < best[:3]):
                best = (len(chosen), have, name, chosen)
        return (best[2], best[3]) if best else None

    def __call__(self, job: PendingJob, ledger: Ledger) -> Block | None:
        if not job.gpus:
            return None
        found = self.victims(job, ledger)
        if found is None:
            return None
        name, chosen = found
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
        node = ledger.nodes[name]
        node.free -= min(node.free, job.gpus)
        cohort = ledger.limit(job.project).cohort
        ledger.pool_reserved[cohort] = ledger.pool_reserved.get(cohort, 0) + job.gpus
        borrowed = sum(r.gpus for r in chosen)
        return Block("reclaiming", {"gpus": borrowed, "deadline": deadline.timestamp(), "need": job.gpus})

    def withdrawn(self) -> list[JobId]:
        """Notices no longer needed: the lender started elsewhere, left, or the victim ended."""
        return [jid for jid in self.existing if jid not in self.claimed]
