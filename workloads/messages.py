"""Websocket message payloads (style rule 18); only workloads.broadcast sends them."""

from __future__ import annotations

from typing import Literal, TypedDict


class JobStateMessage(TypedDict):
    type: Literal["job.state"]
    job: str
    project: str
    state: str
    reason: str
    changed_at: str
    exit_code: int | None
    node: str


def job_group(project_id: int) -> str:
    return f"jobs.project.{project_id}"
