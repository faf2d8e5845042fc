"""Nodes held for a job of several workers that has waited long, so smaller jobs cannot starve it.

A job of several workers starts only when every worker has a place; a steady stream of smaller jobs
takes each GPU as it frees, so without help it may never see enough nodes free at once. Once it has
waited `Settings.workers_hold_after_s` (and its quota would admit it), the nodes it would use are
held for it: at the start of each cycle their free GPUs are taken out of the ledger (up to what its
workers there need), so no job tried before it takes them and they fill up for it as their jobs end;
its own turn gives them back to it (`Ledger.unhold`). Which nodes: of one GPU type, the fewest that could hold
all its workers when empty, those with the most room now first (the soonest ready). The choice is
made again every cycle, from the cluster as it is then.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workloads.queue.admit import Block, quota_block, resource_block, worker_room
from workloads.queue.capacity import Ledger, NodeCap
from workloads.queue.model import ClusterState, JobId, PendingJob


def _empty_room(job: PendingJob, node: NodeCap) -> int:
    return min(job.workers, node.total // job.gpus) if job.gpus else job.workers


class NodeHolder:
    def __init__(self, state: ClusterState, now: datetime) -> None:
        self.now = now
        self.after = timedelta(seconds=state.settings.workers_hold_after_s)
        self.held: dict[str, JobId] = {}

    def _choose(self, job: PendingJob, ledger: Ledger) -> list[tuple[str, int]]:
        """(node, workers it would take) for the nodes to hold; [] where no set could hold them."""
        by_type: dict[str, list[tuple[int, int, str]]] = {}
        for name, node in ledger.nodes.items():
            if name in self.held or not node.serves(job):
                continue
            empty = _empty_room(job, node)
            if empty:
                by_type.setdefault(node.gpu_type, []).append((worker_room(job, node), empty, name))
        best: list[tuple[str, int]] = []
        for gpu_type in sorted(by_type):
            chosen, left = [], job.workers
            for _, empty, name in sorted(by_type[gpu_type], key=lambda r: (-r[0], -r[1], r[2])):
                chosen.append((name, min(empty, left)))
                left -= min(empty, left)
                if not left:
                    break
            if not left and (not best or len(chosen) < len(best)):
                best = chosen
        return best

    def due(self, job: PendingJob) -> bool:
        return (
            job.workers > 1
            and not job.held
            and bool(self.after)
            and self.now - job.submitted_at >= self.after
        )

    def hold(self, job: PendingJob, ledger: Ledger) -> tuple[str, ...]:
        """Hold the nodes chosen for `job` in the ledger; returns their names."""
        chosen = self._choose(job, ledger)
        for name, workers in chosen:
            ledger.hold(job.id, name, workers * job.gpus)
            self.held[name] = job.id
        return tuple(name for name, _ in chosen)

    def first(self, pending: list[PendingJob], ledger: Ledger) -> None:
        """Before any job is tried: hold nodes for each job due a hold (in queue order) that its quota
        would admit, so jobs tried before it cannot take what frees for it."""
        for job in pending:
            lim = ledger.limit(job.project)
            if self.due(job) and not (resource_block(job, ledger, lim) or quota_block(job, ledger, lim)):
                self.hold(job, ledger)

    def __call__(self, job: PendingJob, ledger: Ledger, blocked: Block) -> Block | None:
        """Its own turn, and no place for all its workers: hold nodes for it again and say so (None:
        not due a hold, or no set of nodes could ever hold it)."""
        if not self.due(job):
            return None
        for name in [n for n, held_for in self.held.items() if held_for == job.id]:
            del self.held[name]
        held = self.hold(job, ledger)
        if not held:
            return None
        waited = (self.now - job.submitted_at).total_seconds()
        numbers = {**blocked.numbers, "held": len(held), "waited_s": waited}
        return Block(blocked.code, numbers, blocked.grants, held)
