"""Kubernetes events into the jobs' timelines, many at a time.

The controller batches what the event watch sees (`controller.event_batch`), so a burst of pods
costs one task and two statements (the jobs, one upsert), not a task and an upsert per event. Each
event is keyed by its own uid: a repeated event (count 1, then 3) updates its row, and a batch sent
twice writes nothing new.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from accounts.models import namespace_for
from plugin.names import parse_time
from workloads.choices import EventKind
from workloads.models import Job, JobEvent

Event = dict[str, Any]  # `k8s.status.event_projection`
UPDATED = ["job", "at", "reason", "count", "message", "object_ref"]


def _row(event: Event, job_id: int) -> JobEvent:
    return JobEvent(
        job_id=job_id,
        kind=EventKind.K8S,
        at=parse_time(event.get("at")) or timezone.now(),
        reason=str(event["reason"])[:120],
        count=int(event["count"]),
        message=f"{event['type']}: {event['message']}".strip(": "),
        object_ref=str(event["object"])[:300],
        k8s_uid=str(event["uid"])[:64],
    )


def k8s_events_record(*, events: list[Event]) -> int:
    """Upsert the events into their jobs' timelines in one statement; returns how many were kept.

    Only an event in its job's own namespace counts: the uid in a pod's name is no proof on its own,
    since another tenant can name a pod after a job that is not theirs."""
    wanted = {e["job_uid"] for e in events if e.get("uid")}
    jobs = {
        str(uid): (pk, namespace_for(slug))
        for uid, pk, slug in Job.objects.filter(uid__in=wanted).values_list("uid", "pk", "project__slug")
    }
    rows: dict[str, JobEvent] = {}  # by event uid: the last one seen wins (its count is the highest)
    for event in events:
        job = jobs.get(str(event["job_uid"]))
        if job is not None and event.get("uid") and event.get("namespace") == job[1]:
            rows[str(event["uid"])[:64]] = _row(event, job[0])
    if rows:
        JobEvent.objects.bulk_create(
            list(rows.values()), update_conflicts=True, unique_fields=["k8s_uid"], update_fields=UPDATED
        )
    return len(rows)


def k8s_event_record(*, event: Event) -> JobEvent | None:
    """One event (the task of earlier releases, still served while their messages drain)."""
    if not k8s_events_record(events=[event]):
        return None
    return JobEvent.objects.filter(k8s_uid=str(event["uid"])[:64]).first()
