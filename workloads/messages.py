"""Websocket message payloads (style rule 18); only workloads.broadcast sends them."""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class JobStateMessage(TypedDict):
    type: Literal["job.state"]
    job: str
    project: str
    state: str
    reason: str
    changed_at: str
    exit_code: int | None
    node: str
    queue: dict[str, Any] | None  # workloads.queue_selectors.queue_summary


def job_group(project_id: int) -> str:
    return f"jobs.project.{project_id}"
