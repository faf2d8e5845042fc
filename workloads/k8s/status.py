"""What the cluster says about one job: derived only from Kubernetes evidence (R4). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workloads.choices import JobState

Obj = dict[str, Any]


@dataclass(frozen=True)
class Observation:
    state: JobState | None  # None: no evidence of a change
    reason: str = ""
    exit_code: int | None = None
    node: str = ""
    pod_name: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _condition(job: Obj, kind: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def _terminated(pod: Obj) -> Obj | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = (status.get("state") or {}).get("terminated")
        if state:
            return dict(state)
    return None


def _latest_pod(pods: list[Obj]) -> Obj | None:
    live = [p for p in pods if p]
    if not live:
        return None
    return max(live, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")


def _pod_facts(pod: Obj | None) -> tuple[str, str, int | None, datetime | None]:
    if pod is None:
        return "", "", None, None
    term = _terminated(pod)
    code = int(term["exitCode"]) if term and term.get("exitCode") is not None else None
    started = _time((pod.get("status") or {}).get("startTime"))
    return (pod.get("spec") or {}).get("nodeName") or "", pod["metadata"]["name"], code, started


def observe(job: Obj | None, pods: list[Obj]) -> Observation:
    """The state the evidence supports: Job conditions first, then the pod's phase."""
    if job is None:
        return Observation(None, "Kubernetes Job not found")
    pod = _latest_pod(pods)
    node, pod_name, code, started = _pod_facts(pod)
    status = job.get("status") or {}
    started = started or _time(status.get("startTime"))
    complete, failed = _condition(job, "Complete"), _condition(job, "Failed")
    if complete:
        done = _time(complete.get("lastTransitionTime")) or _time(status.get("completionTime"))
        return Observation(
            JobState.SUCCEEDED, "Completed", code if code is not None else 0, node, pod_name, started, done
        )
    if failed:
        reason = failed.get("reason") or "Failed"
        text = f"{reason}: {failed.get('message', '')}".strip(": ")
        return Observation(
            JobState.FAILED,
            text[:300],
            code,
            node,
            pod_name,
            started,
            _time(failed.get("lastTransitionTime")),
        )
    phase = (pod.get("status") or {}).get("phase") if pod else None
    if phase in ("Running", "Succeeded", "Failed"):
        return Observation(JobState.RUNNING, f"Pod {pod_name} on {node}", None, node, pod_name, started)
    return Observation(None, "", None, node, pod_name)
