"""Services that write what the cluster reported: job reconcile, Kubernetes events, orphans.

They run inside Celery tasks (thin wrappers in tasks.py) and in the controller's sweep; each is
keyed by ids, idempotent, and holds no row lock across a Kubernetes call.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Project
from workloads.choices import TERMINAL_STATES, EventKind
from workloads.k8s import builders
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.job import JobReconciler
from workloads.k8s.reconcilers.namespace import reconcile_namespace
from workloads.models import Job, JobEvent, OrphanReport

log = logging.getLogger(__name__)
JOB_NAME = re.compile(r"^job-([0-9a-f-]{36})(?:-[a-z0-9]+)?$")


def job_reconcile(*, job_id: int, client: KubeClient) -> None:
    job = Job.objects.select_related("project").filter(pk=job_id).first()
    if job is None:
        return
    JobReconciler(job, client).run()


def namespace_reconcile(*, project_id: int, client: KubeClient) -> list[str]:
    project = Project.objects.filter(pk=project_id, is_active=True).first()
    return reconcile_namespace(project, client) if project else []


def event_projection(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The few fields of a core/v1 Event the timeline keeps, or None when it is not a job's."""
    involved = obj.get("involvedObject") or {}
    match = JOB_NAME.match(str(involved.get("name", "")))
    if match is None or involved.get("kind") not in ("Job", "Pod"):
        return None
    meta = obj.get("metadata") or {}
    return {
        "uid": meta.get("uid", ""),
        "job_uid": match.group(1),
        "object": f"{involved.get('kind')}/{involved.get('name')}",
        "reason": str(obj.get("reason", ""))[:120],
        "message": str(obj.get("message", ""))[:2000],
        "type": obj.get("type", ""),
        "count": int(obj.get("count") or 1),
        "at": obj.get("lastTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp"),
    }


def k8s_event_record(*, event: dict[str, Any]) -> JobEvent | None:
    """Upsert one Kubernetes event into its job's timeline (keyed by the event's uid)."""
    job = Job.objects.filter(uid=event["job_uid"]).first()
    if job is None or not event.get("uid"):
        return None
    at = datetime.fromisoformat(event["at"].replace("Z", "+00:00")) if event.get("at") else timezone.now()
    fields = {
        "job": job,
        "kind": EventKind.K8S,
        "at": at,
        "reason": event["reason"],
        "count": event["count"],
        "message": f"{event['type']}: {event['message']}".strip(": "),
        "object_ref": event["object"][:300],
    }
    try:
        with transaction.atomic():
            row, _ = JobEvent.objects.update_or_create(k8s_uid=event["uid"], defaults=fields)
    except IntegrityError:
        return JobEvent.objects.filter(k8s_uid=event["uid"]).first()
    return row


def orphans_report(*, cluster_jobs: list[dict[str, Any]]) -> list[OrphanReport]:
    """Cluster Jobs with the portal's labels and no portal row: reported (logged, listed in the admin)."""
    by_uid = {}
    for obj in cluster_jobs:
        meta = obj.get("metadata") or {}
        uid = (meta.get("labels") or {}).get(builders.UID_LABEL, "")
        by_uid[uid] = (meta.get("namespace", ""), meta.get("name", ""))
    known = {
        str(u)
        for u in Job.objects.filter(uid__in=[u for u in by_uid if _is_uuid(u)]).values_list("uid", flat=True)
    }
    now, reports = timezone.now(), []
    for uid, (namespace, name) in by_uid.items():
        if uid in known:
            continue
        log.warning("orphan Kubernetes Job %s/%s (uid label %r): no portal job", namespace, name, uid)
        report, _ = OrphanReport.objects.update_or_create(
            namespace=namespace,
            name=name,
            defaults={"job_uid": uid[:64], "last_seen": now, "resolved_at": None},
        )
        reports.append(report)
    return reports


def _is_uuid(text: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text))


def jobs_needing_reconcile() -> list[int]:
    """Every job the sweep must look at again: not terminal, or terminal with cluster work left."""
    live = Job.objects.exclude(state__in=TERMINAL_STATES).values_list("pk", flat=True)
    cancelled = Job.objects.filter(state="cancelled", deleted_in_cluster_at__isnull=True).values_list(
        "pk", flat=True
    )
    unlogged = (
        Job.objects.filter(state__in=TERMINAL_STATES, log_captured=False)
        .exclude(pod_name="")
        .values_list("pk", flat=True)
    )
    return sorted(set(live) | set(cancelled) | set(unlogged))
