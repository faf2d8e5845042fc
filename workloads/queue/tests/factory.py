"""Small builders for the queue tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from workloads.queue import ClusterState, NodeState, PendingJob, ProjectQuota, RunningJob, Settings, Usage

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(jid: int, project: str = "a", owner: str = "alice", gpus: int = 1, **kw: Any) -> PendingJob:
    kw.setdefault("submitted_at", at(jid))
    return PendingJob(id=jid, project=project, owner=owner, gpus=gpus, **kw)


def running(jid: int, project: str, node: str, gpus: int, **kw: Any) -> RunningJob:
    kw.setdefault("owner", "bob")
    kw.setdefault("started_at", at(-600))
    kw.setdefault("max_runtime_s", 3600)
    return RunningJob(id=jid, project=project, node=node, gpus=gpus, **kw)


def node(name: str, free: int, total: int = 8, gpu_type: str = "h200", **kw: Any) -> NodeState:
    return NodeState(name=name, gpu_type=gpu_type, free_gpus=free, total_gpus=total, **kw)


def state(
    pending: Sequence[PendingJob],
    nodes: Sequence[NodeState],
    quotas: list[ProjectQuota],
    running_jobs: list[RunningJob] | None = None,
    **kw: Any,
) -> ClusterState:
    kw.setdefault("usage", Usage(as_of=T0))
    kw.setdefault("settings", Settings(preemption_notice_s=300))
    return ClusterState(
        pending=tuple(pending),
        running=tuple(running_jobs or ()),
        nodes=tuple(nodes),
        quotas={q.project: q for q in quotas},
        **kw,
    )
