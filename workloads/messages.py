"""The shapes that leave the queue and the job rows: the stored queue explanation, the `queue` summary
of the API and pages, and the websocket payloads (only `workloads.services.broadcast` sends those).

Each shape is written by one function here and only read elsewhere; the queue line people see is
formatted once (`queue_line`), on the server, and sent to the live pages ready to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, TypedDict

from workloads.queue import Explanation


class QueueExplanation(TypedDict):
    """What the admission cycle stores on a job (`Job.queue_explanation`)."""

    code: str
    sentence: str
    hints: list[str]
    numbers: dict[str, float]
    position_project: int | None
    position_global: int | None
    estimated_start: str | None  # ISO 8601, UTC


class QueueSummary(TypedDict):
    """The read-only `queue` object of a queued job in the API, the pages and the websocket."""

    position: int | None
    position_in_project: int | None
    estimated_start: str | None
    code: str
    reason: str
    hints: list[str]
    held: bool
    text: str  # the one-line form of all the above, as pages show it


class JobStateMessage(TypedDict):
    type: Literal["job.state"]
    job: str
    project: str
    state: str
    reason: str
    changed_at: str
    exit_code: int | None
    node: str
    queue: QueueSummary | None
    reason_line: str  # `reason_line`: what the pages show


def explanation_stored(e: Explanation) -> QueueExplanation:
    return {
        "code": e.code,
        "sentence": e.sentence,
        "hints": list(e.hints),
        "numbers": dict(e.numbers),
        "position_project": e.position_project or None,
        "position_global": e.position_global or None,
        "estimated_start": e.estimated_start.isoformat() if e.estimated_start else None,
    }


def explanation_admitted(node: str, borrowing: bool) -> QueueExplanation:
    sentence = f"admitted on {node}" + (" (borrowed quota, may be preempted)" if borrowing else "")
    return {
        "code": "admitted",
        "sentence": sentence,
        "hints": [],
        "numbers": {},
        "position_project": None,
        "position_global": None,
        "estimated_start": None,
    }


def queue_summary_of(stored: Mapping[str, Any], *, held: bool) -> QueueSummary:
    """Read a stored explanation (possibly empty: before the first cycle) as the public summary."""
    summary: QueueSummary = {
        "position": stored.get("position_global"),
        "position_in_project": stored.get("position_project"),
        "estimated_start": stored.get("estimated_start"),
        "code": stored.get("code", "pending"),
        "reason": stored.get("sentence") or "waiting for the next admission cycle",
        "hints": list(stored.get("hints") or []),
        "held": held,
        "text": "",
    }
    summary["text"] = queue_line(summary)
    return summary


def queue_line(q: QueueSummary) -> str:
    """`#3: quota 8/8 GPUs · starts ≈ 2026-12-01 14:00 UTC · asking 1 GPU would start now`."""
    text = (f"#{q['position']}: " if q["position"] else "") + str(q["reason"])
    if q["estimated_start"]:
        start = datetime.fromisoformat(q["estimated_start"])
        text += f" · starts ≈ {start:%Y-%m-%d %H:%M} UTC"
    if q["hints"]:
        text += " · " + "; ".join(q["hints"])
    return text


def reason_line(
    *,
    state: str,
    state_reason: str,
    node: str,
    nodes: int,
    started_at: datetime | None,
    queue: QueueSummary | None,
) -> str:
    """Why a job is where it is, in words people read: "running on gpu-node-1 since 14:02 UTC",
    "waiting: project quota 6/6 GPUs in use"; an ended job keeps the cluster's own words."""
    if state == "queued" and queue is not None:
        reason = str(queue["reason"])
        return reason if reason.startswith("waiting") else f"waiting: {reason}"
    if state == "running" and node:
        where = node if nodes <= 1 else f"{nodes} nodes"
        return f"running on {where}" + (f" since {started_at:%H:%M} UTC" if started_at else "")
    if state == "admitted" and node:
        return f"starting on {node}"
    return state_reason


def job_group(project_id: int) -> str:
    return f"jobs.project.{project_id}"
