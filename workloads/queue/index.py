"""Per-project queues kept in order between cycles, so a cycle never sorts the whole queue.

The queue order (ordering.py) within one project and one owner never changes while the jobs wait:
priority, front, submit time and id are fixed, and the fair-share terms are the same for all of that
owner's jobs. So each (project, owner) list is kept sorted as jobs arrive and leave, and a cycle
merges the owners' lists of a project lazily with this cycle's user usage: it reads only as far as
admission gets (the heads, plus what it admits), instead of ordering every waiting job.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from datetime import datetime

from workloads.queue.model import JobId, PendingJob, Usage

StaticKey = tuple[int, int, datetime, JobId]
Entry = tuple[StaticKey, PendingJob]


def static_key(job: PendingJob) -> StaticKey:
    return (-job.priority, 0 if job.front else 1, job.submitted_at, job.id)


class QueueIndex:
    """The waiting jobs, by project and owner, each list in queue order."""

    def __init__(self) -> None:
        self._lists: dict[str, dict[str, list[Entry]]] = {}
        self._where: dict[JobId, tuple[str, str, StaticKey]] = {}

    @classmethod
    def of(cls, pending: Iterable[PendingJob]) -> QueueIndex:
        index = cls()
        for job in pending:
            key = static_key(job)
            index._lists.setdefault(job.project, {}).setdefault(job.owner, []).append((key, job))
            index._where[job.id] = (job.project, job.owner, key)
        for owners in index._lists.values():
            for entries in owners.values():
                entries.sort(key=lambda e: e[0])
        return index

    def __len__(self) -> int:
        return len(self._where)

    def add(self, job: PendingJob) -> None:
        if job.id in self._where:
            self.remove(job.id)
        key = static_key(job)
        entries = self._lists.setdefault(job.project, {}).setdefault(job.owner, [])
        bisect.insort(entries, (key, job), key=lambda e: e[0])
        self._where[job.id] = (job.project, job.owner, key)

    def remove(self, job_id: JobId) -> None:
        project, owner, key = self._where.pop(job_id)
        owners = self._lists[project]
        entries = owners[owner]
        del entries[bisect.bisect_left(entries, key, key=lambda e: e[0])]
        if not entries:
            del owners[owner]
            if not owners:
                del self._lists[project]

    def queues(self, usage: Usage) -> dict[str, Iterator[PendingJob]]:
        """Each project's admissible jobs (held ones skipped) in queue order, read lazily."""
        return {project: self._project(project, owners, usage) for project, owners in self._lists.items()}

    @staticmethod
    def _project(project: str, owners: dict[str, list[Entry]], usage: Usage) -> Iterator[PendingJob]:
        def one(owner: str, entries: list[Entry]) -> Iterator[tuple[tuple[object, ...], PendingJob]]:
            share = usage.users.get((project, owner), 0.0)
            for (prio, front, at, jid), job in entries:
                if not job.held:
                    yield (prio, front, share, at, jid), job

        merged = heapq.merge(*(one(o, e) for o, e in owners.items()), key=lambda pair: pair[0])
        return (job for _, job in merged)
