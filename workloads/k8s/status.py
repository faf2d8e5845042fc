"""What the cluster says about one job: derived only from Kubernetes evidence, never guessed. Pure.

`observe` reads a Job and its pods (its pods alone when the Job is gone); `evidence` on the result says
whether the read showed anything of the run at all (a pod or an outcome), which is what decides
"unknown" (workloads.services.evidence); `event_projection` keeps the few fields of an Event that a
job's timeline shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plugin.names import parse_time
from workloads.choices import JobState
from workloads.k8s.labels import worker_index

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"  # the Job controller's, on each pod it made

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
    evidence: bool = False  # a pod or a terminal condition was seen: the run is not unaccounted for


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
    """The pod that speaks for the job: its newest; for a job of several workers, a failed worker's
    (its exit code is the job's) or else the first worker's."""
    live = [p for p in pods if p]
    if not live:
        return None
    if any(worker_index(p) is not None for p in live):
        failed = [p for p in live if (p.get("status") or {}).get("phase") == "Failed"]
        live = failed or [p for p in live if worker_index(p) == 0] or live
    return max(live, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")


def _pod_facts(pod: Obj | None) -> tuple[str, str, int | None, datetime | None]:
    if pod is None:
        return "", "", None, None
    term = _terminated(pod)
    code = int(term["exitCode"]) if term and term.get("exitCode") is not None else None
    started = parse_time((pod.get("status") or {}).get("startTime"))
    return (pod.get("spec") or {}).get("nodeName") or "", pod["metadata"]["name"], code, started


def _pods_only(pod: Obj | None) -> Observation:
    """The Job is gone (deleted with orphaned pods, or its pods not collected yet): a pod's own
    phase is then the only evidence, and its end is the outcome (no Job condition will come)."""
    if pod is None:
        return Observation(None, "Kubernetes Job not found")
    node, pod_name, code, started = _pod_facts(pod)
    phase = (pod.get("status") or {}).get("phase")
    gone = "its Kubernetes Job is gone"
    if phase == "Succeeded":
        return Observation(
            JobState.SUCCEEDED,
            f"Pod {pod_name} succeeded; {gone}",
            code or 0,
            node,
            pod_name,
            started,
            evidence=True,
        )
    if phase == "Failed":
        why = f"Pod {pod_name} failed (exit code {code}); {gone}"
        return Observation(JobState.FAILED, why, code, node, pod_name, started, evidence=True)
    if phase == "Running":
        return Observation(
            JobState.RUNNING,
            f"Pod {pod_name} on {node}; {gone}",
            None,
            node,
            pod_name,
            started,
            evidence=True,
        )
    return Observation(None, "", None, node, pod_name, evidence=True)


def _own(job: Obj, pods: list[Obj]) -> list[Obj]:
    """The Job's own pods: not those of an earlier Job of the same name (a job of several workers
    started again) that are still being collected."""
    uid = (job.get("metadata") or {}).get("uid")
    if not uid:
        return pods
    return [
        p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(CONTROLLER_UID, uid) == uid
    ]


def observe(job: Obj | None, pods: list[Obj]) -> Observation:
    """The state the evidence supports: Job conditions first, then the pod's phase."""
    pod = _latest_pod(pods if job is None else _own(job, pods))
    if job is None:
        return _pods_only(pod)
    node, pod_name, code, started = _pod_facts(pod)
    status = job.get("status") or {}
    started = started or parse_time(status.get("startTime"))
    complete, failed = _condition(job, "Complete"), _condition(job, "Failed")
    if complete:
        done = parse_time(complete.get("lastTransitionTime")) or parse_time(status.get("completionTime"))
        return Observation(
            JobState.SUCCEEDED,
            "Completed",
            code if code is not None else 0,
            node,
            pod_name,
            started,
            done,
            evidence=True,
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
            parse_time(failed.get("lastTransitionTime")),
            evidence=True,
        )
    phase = (pod.get("status") or {}).get("phase") if pod else None
    if phase in ("Running", "Succeeded", "Failed"):
        return Observation(
            JobState.RUNNING, f"Pod {pod_name} on {node}", None, node, pod_name, started, evidence=True
        )
    return Observation(None, "", None, node, pod_name, evidence=pod is not None)


# A Job, its pod (job-<uid>-<suffix>) or a worker's pod (job-<uid>-<index>-<suffix>).
JOB_NAME = re.compile(r"^job-([0-9a-f-]{36})(?:-[a-z0-9]+){0,2}$")


def event_projection(obj: Obj) -> Obj | None:
    """The few fields of a core/v1 Event the timeline keeps, or None when it is not a job's.

    The namespace travels with it: a name like `job-<uid>` can be written by anyone who may create
    pods somewhere, so the record step also checks that the event is in the job's own namespace.
    """
    involved = obj.get("involvedObject") or {}
    match = JOB_NAME.match(str(involved.get("name", "")))
    if match is None or involved.get("kind") not in ("Job", "Pod"):
        return None
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    if not namespace or involved.get("namespace", namespace) != namespace:
        return None
    return {
        "uid": meta.get("uid", ""),
        "namespace": namespace,
        "job_uid": match.group(1),
        "object": f"{involved.get('kind')}/{involved.get('name')}",
        "reason": str(obj.get("reason", ""))[:120],
        "message": str(obj.get("message", ""))[:2000],
        "type": obj.get("type", ""),
        "count": int(obj.get("count") or 1),
        "at": obj.get("lastTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp"),
    }
