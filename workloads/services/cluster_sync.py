"""Services that bring the cluster in line with the portal and write back what the cluster reported:
job reconcile, namespace reconcile, orphans (Kubernetes events: services/k8s_events.py).

They run inside Celery tasks (thin wrappers in tasks.py) and in the sweep; each is keyed by ids,
idempotent, and holds no row lock across a Kubernetes call.

Steps of `job_sync()` (each is idempotent, so a worker killed anywhere is harmless):

1. Cancelled: keep the log, delete the Job with background propagation (404 = done).
2. Missing in the cluster and never created: reload the job's state first (cancelled meanwhile: as
   1, and nothing is made; its row deleted: nothing to do), then create it, suspended unless
   already admitted (409 AlreadyExists = done), and record that it exists. Missing after it was
   created: its pods are the only evidence left; with none the job is "unknown", never "failed",
   and "lost" after a while (services/evidence.py).
   A lost job's Job that shows up again is deleted: its quota was given back.
3. `spec.suspend` follows the portal: false once admitted (or unknown), true while queued or preempted.
   A job of several workers: once all its pods exist, each is pinned to its planned node and all are
   released together (workloads/k8s/workers.py), after its headless Service and NetworkPolicy.
4. Observe Job conditions and the pod, move the row forward by compare-and-swap. A job of several
   workers one of which failed starts again as a whole where restarts are left (services/workers.py).
5. Finished: keep the last part of the log in the row so it outlives the pod.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Project
from workloads import app_settings
from workloads.choices import ACTIVE_STATES, TERMINAL_STATES, JobState
from workloads.k8s import labels, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError, K8sTransientError
from workloads.k8s.faults import fault_point
from workloads.k8s.pages import list_all, metadata_only
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj
from workloads.k8s.reconcilers.job import JobReconciler
from workloads.k8s.reconcilers.namespace import reconcile_namespace, reconcile_quota
from workloads.k8s.status import Observation, observe
from workloads.models import Job, JobEvent, OrphanReport, ProjectVolume
from workloads.selectors import jobs_needing_reconcile, jobs_with_project, namespace_tenant, project_claims
from workloads.services.evidence import GONE, evidence_judge
from workloads.services.publisher import enqueue_reconcile, namespace_refresh, outbox_done, outbox_seen
from workloads.services.transitions import job_note, job_transition
from workloads.services.volumes import volumes_sync
from workloads.services.workers import workers_restart

log = logging.getLogger(__name__)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def namespace_sync(*, project: Project, client: KubeClient) -> list[str]:
    """Converge the project's namespace, its guard rails and its volumes' claims; returns the kinds
    touched (claims are written back to their rows instead)."""
    touched = reconcile_namespace(namespace_tenant(project=project), client)
    volumes_sync(project=project, client=client)
    return touched


def _guard_rails_elsewhere(project: Project) -> bool:
    """With a separate provisioner (the chart), this identity may not write namespaces or quotas:
    ask the provisioner's worker instead. True when it was asked."""
    if not app_settings.provisioner_queue():
        return False
    namespace_refresh(project.pk)
    return True


def namespace_reconcile(*, project_id: int, client: KubeClient) -> list[str]:
    project = Project.objects.filter(pk=project_id, is_active=True).first()
    return namespace_sync(project=project, client=client) if project else []


def job_reconcile(*, job_id: int, client: KubeClient) -> None:
    job = jobs_with_project().filter(pk=job_id).first()
    if job is not None:
        job_sync(job=job, client=client)


def job_sync(*, job: Job, client: KubeClient) -> None:
    """Converge one job as loaded (the steps are in the module docstring)."""
    seen = outbox_seen(job.pk)  # the request this run answers; one written meanwhile stays
    fault_point("after_load")
    # Only a job's own mounts are looked up in them: most jobs mount none (a query per reconcile).
    claims = project_claims(project=job.project) if job.volumes else {}
    r = JobReconciler(job, client, claims=claims)
    if job.state == JobState.CANCELLED:
        _cancel(r, seen=seen)
        return
    current = r.current()
    pods: list[Obj] | None = None  # None: listed when observed
    if current is None and job.created_in_cluster_at is None and not job.is_terminal:
        if _volume_removed(job, claims):
            _cancel(r, seen=seen)
            return
        if not _state_as_now(r):
            return  # the row was deleted since this run loaded it: nothing to make
        if job.state == JobState.CANCELLED:  # cancelled since: make nothing rather than make and delete
            _cancel(r, seen=seen)
            return
        created = _create(r)
        if Job.objects.filter(pk=job.pk, state=JobState.CANCELLED).exists():
            _cancel(r, seen=seen, force=True)  # cancelled while we were creating: take it back
            return
        # The POST answers with the Job as made, and a Job made this instant has no pods yet; after a
        # 409 (another run made it first) both are read.
        current, pods = (created, []) if created is not None else (r.current(), None)
    elif current is None:
        _missing(r, seen=seen)
        return
    elif job.state == JobState.LOST:  # back after it was declared lost: its GPUs are someone else's
        _cancel(r, seen=seen, force=True)
        return
    elif job.created_in_cluster_at is None:  # created by an attempt that died before recording it
        _mark_created(job)
    if current is not None and not job.is_terminal:
        current = _suspend_as_now(r, current)
        fault_point("after_suspend_patch")
        if job.workers > 1 and not r.want_suspended():
            pods = r.pods() if pods is None else pods
            if r.release_workers(current, pods):
                pods = None  # released: observed as they are now
    _observe(r, current, pods)
    outbox_done(job.pk, seen=seen)


def _volume_removed(job: Job, claims: dict[str, ProjectVolume]) -> bool:
    """A volume the job mounts was removed from its project before the job was made: cancel it with
    the reason (it can never start as asked) instead of failing to build it on every retry."""
    gone = sorted({v["volume"] for v in job.volumes} - set(claims))
    if not gone:
        return False
    reason = f"volume {', '.join(gone)} was removed from the project before the job started"
    job_transition(job=job, to=JobState.CANCELLED, reason=reason)
    job.refresh_from_db()
    return True


def _state_as_now(r: JobReconciler) -> bool:
    """Reload what admission sets (False: the row is gone). Read just before a Job is made or
    (un)suspended, not when this run loaded the job: a preemption committed meanwhile must never be
    answered by a running Job on reclaimed GPUs, and a borrowing job's quota is raised first."""
    now = (
        Job.objects.filter(pk=r.owner.pk)
        .values_list("state", "planned_node", "worker_nodes", "borrowing")
        .first()
    )
    if now is None:
        return False
    r.owner.state, r.owner.planned_node, r.owner.worker_nodes, r.owner.borrowing = now
    return True


def _suspend_as_now(r: JobReconciler, current: Obj) -> Obj:
    """(Un)suspend the Kubernetes Job as the job's state is now (see `_state_as_now`)."""
    if not _state_as_now(r):
        return current
    try:
        r.reconcile(current, {})
    except NeedsUpdate:
        _quota_first(r)
        return r.update(current, {})
    return current


def _quota_first(r: JobReconciler) -> None:
    """A borrowing job's GPUs are above the base quota: raise the ResourceQuota before its pods."""
    if r.owner.borrowing and not r.want_suspended() and not _guard_rails_elsewhere(r.owner.project):
        reconcile_quota(namespace_tenant(project=r.owner.project), r.client)


def _create(r: JobReconciler) -> Obj | None:
    """The Job as the POST answered it; None when it already existed (409). Made as the job's state
    is now: suspended while queued; running at once when admission came first (under load the
    usual case), which spares a PATCH and the Job controller's suspend and resume (status writes
    and events). The caller has just reloaded that state (`_state_as_now`)."""
    _quota_first(r)
    fault_point("before_create")
    try:
        created = r.create(r.desired())
    except K8sError as exc:
        if exc.status != 404:  # 404: the namespace is missing; make it and retry once
            raise
        if _guard_rails_elsewhere(r.owner.project):  # the task retries once the provisioner made it
            raise K8sTransientError(503, f"namespace {r.owner.project.namespace} is being made") from exc
        namespace_sync(project=r.owner.project, client=r.client)
        created = r.create(r.desired())
    fault_point("after_create")
    _mark_created(r.owner)
    return created


def _mark_created(job: Job) -> None:
    Job.objects.filter(pk=job.pk, created_in_cluster_at__isnull=True).update(
        created_in_cluster_at=timezone.now()
    )


def _observe(r: JobReconciler, current: Obj | None, pods: list[Obj] | None = None) -> None:
    """Move the row as the Job and its pods show (`pods`: already known, else listed now)."""
    job = r.owner
    obs = observe(current, r.pods() if pods is None else pods)
    if workers_restart(r=r, obs=obs):
        return
    _apply_observation(job, obs)
    evidence_judge(r, obs, job_gone=current is None)
    job.refresh_from_db()
    if job.state in TERMINAL_STATES and not job.log_captured:
        capture_log(r)


def _missing(r: JobReconciler, *, seen: datetime | None) -> None:
    """The Job is gone (a successful 404). A run may exist only once admitted; a queued or
    preempted job's Job was suspended, so nothing ran and a note says what happened."""
    job = r.owner
    if job.state in ACTIVE_STATES:
        _observe(r, None)
    elif not job.is_terminal and not JobEvent.objects.filter(job=job, reason=GONE[:120]).exists():
        job_note(job=job, reason=GONE[:120], message=GONE)
    outbox_done(job.pk, seen=seen)


def _cancel(r: JobReconciler, *, seen: datetime | None, force: bool = False) -> None:
    job = r.owner
    if force or job.deleted_in_cluster_at is None:
        if job.pod_name and not job.log_captured:
            _capture_before_delete(r)
        fault_point("before_delete")
        r.delete()
        fault_point("after_delete")
        Job.objects.filter(pk=job.pk).update(deleted_in_cluster_at=timezone.now())
    outbox_done(job.pk, seen=seen)


def _apply_observation(job: Job, obs: Observation) -> None:
    facts: dict[str, Any] = {}
    if obs.node and obs.node != job.node:
        facts["node"] = obs.node
    if obs.pod_name and obs.pod_name != job.pod_name:
        facts["pod_name"] = obs.pod_name
    if facts:
        Job.objects.filter(pk=job.pk).update(**facts)
    if obs.state is None or obs.state == job.state:
        return
    extra: dict[str, Any] = {"exit_code": obs.exit_code, "finished_at": obs.finished_at}
    if job.state == JobState.UNKNOWN and job.started_at is not None:
        extra["started_at"] = job.started_at  # the same run, seen again: it held the GPUs all along
    elif obs.state == JobState.RUNNING or job.started_at is None:
        extra["started_at"] = obs.started_at
    if obs.state in TERMINAL_STATES and job.state in (JobState.QUEUED, JobState.ADMITTED) and obs.started_at:
        Job.objects.filter(pk=job.pk, started_at__isnull=True).update(started_at=obs.started_at)
    job_transition(job=job, to=obs.state, reason=obs.reason or obs.state, **extra)


def capture_log(r: JobReconciler) -> None:
    """Keep the end of the pod's log (app_settings.log_tail_bytes) in the row; for a job of several
    workers, the end of each worker's, worker 0 first, each under a header, sharing the bytes."""
    job = r.owner
    text, truncated = "", False
    try:
        if job.workers > 1:
            text, truncated = _worker_logs(r)
        elif job.pod_name:
            data, truncated = _readable(functools.partial(r.log_tail, app_settings.log_tail_bytes()))
            text = _text(data)
    except K8sError as exc:  # the node may be back later: the sweep retries
        log.warning("log of %s not readable yet: %s", job, exc)
        return
    Job.objects.filter(pk=job.pk).filter(Q(log_captured=False)).update(
        log_tail=text, log_truncated=truncated, log_captured=True
    )
    job.log_captured = True


def _readable(read: Callable[[], tuple[bytes, bool]]) -> tuple[bytes, bool]:
    """A log as read; none where the pod has none (400, 404: never started, or gone)."""
    try:
        return read()
    except K8sError as exc:
        if exc.status not in (400, 404):
            raise
        return b"", False


def _text(data: bytes) -> str:
    # Postgres text cannot hold NUL, which a program may well print: kept as U+FFFD.
    return data.decode(errors="replace").replace("\x00", "\ufffd")


def _worker_logs(r: JobReconciler) -> tuple[str, bool]:
    pods = r.worker_pods()
    share = app_settings.log_tail_bytes() // max(1, r.owner.workers)
    parts, cut = [], False
    for index, pod in pods:
        data, truncated = _readable(functools.partial(r.pod_log_tail, pod, share))
        parts.append(f"==> worker {index} ({pod}) <==\n{_text(data)}")
        cut = cut or truncated
    return "\n".join(parts), cut


def _capture_before_delete(r: JobReconciler) -> None:
    """The log, if the database takes it: a log that cannot be kept must never keep a cancelled
    job running (and holding GPUs the portal counts as free)."""
    try:
        with transaction.atomic():
            capture_log(r)
    except DatabaseError:
        log.exception("log of %s could not be kept; deleting the job without it", r.owner)
        Job.objects.filter(pk=r.owner.pk).update(log_captured=True)
        r.owner.log_captured = True


def orphans_report(*, cluster_jobs: list[dict[str, Any]]) -> list[OrphanReport]:
    """Cluster Jobs with the portal's labels and no portal row: reported (listed in the admin) in one
    upsert per sweep, and logged once when first seen (or seen again after an operator resolved it).
    Only in this portal's namespaces: another portal on the cluster (another prefix) labels its Jobs
    the same way, and they are not ours to report."""
    found: dict[tuple[str, str], str] = {}  # (namespace, name) -> its uid label
    for obj in cluster_jobs:
        meta = obj.get("metadata") or {}
        if not app_settings.is_portal_namespace(str(meta.get("namespace", ""))):
            continue
        found[(meta.get("namespace", ""), meta.get("name", ""))] = (meta.get("labels") or {}).get(
            labels.UID_LABEL, ""
        )
    valid = [u for u in found.values() if UUID.fullmatch(u)]
    known = {str(u) for u in Job.objects.filter(uid__in=valid).values_list("uid", flat=True)}
    orphans = {key: uid for key, uid in found.items() if uid not in known}
    if not orphans:
        return []
    open_before = set(
        OrphanReport.objects.filter(
            resolved_at=None, namespace__in={ns for ns, _ in orphans}, name__in={n for _, n in orphans}
        ).values_list("namespace", "name")
    )
    for (namespace, name), uid in orphans.items():
        if (namespace, name) not in open_before:
            log.warning("orphan Kubernetes Job %s/%s (uid label %r): no portal job", namespace, name, uid)
    now = timezone.now()
    rows = [
        OrphanReport(
            namespace=ns, name=name, job_uid=uid[:64], first_seen=now, last_seen=now, resolved_at=None
        )
        for (ns, name), uid in orphans.items()
    ]
    return OrphanReport.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["namespace", "name"],
        update_fields=["job_uid", "last_seen", "resolved_at"],
    )


def sweep(*, client: KubeClient) -> int:
    """Re-enqueue every job with cluster work left, but for queued jobs at rest (stops at the first
    broker failure: the outbox keeps the rest), then report orphans. Returns how many it enqueued.

    One LIST of the managed Jobs serves both. A queued job whose Job the list shows suspended with
    no pod running has nothing to converge, and its reconcile (a GET, a pod LIST and a handful of
    queries) would be repeated for every waiting job every sweep; a change to its Job (un-suspended,
    deleted) shows in the list and brings it back. When the list fails, every job is enqueued, as
    before, and the error is raised."""
    query = {"labelSelector": labels.MANAGED_SELECTOR}
    try:
        cluster_jobs = list_all(client, paths.ALL_JOBS, query, keep=_sweep_view)
    except Exception:
        _enqueue(jobs_needing_reconcile())
        raise
    ids = jobs_needing_reconcile(queued_at_rest=_queued_at_rest(cluster_jobs))
    _enqueue(ids)
    orphans_report(cluster_jobs=cluster_jobs)
    return len(ids)


def _enqueue(ids: list[int]) -> None:
    for job_id in ids:
        if not enqueue_reconcile(job_id):
            break


def _sweep_view(obj: Obj) -> Obj:
    """What the sweep reads of a Job: its metadata, whether it is suspended, its running pods."""
    status = obj.get("status") or {}
    return {
        **metadata_only(obj),
        "spec": {"suspend": bool((obj.get("spec") or {}).get("suspend"))},
        "status": {"active": int(status.get("active") or 0)},
    }


def _queued_at_rest(cluster_jobs: list[Obj]) -> set[str]:
    """Job uids (the portal's label, when it is a uid at all) whose Job is suspended with no pod
    running."""
    return {
        uid
        for job in cluster_jobs
        if job["spec"]["suspend"]
        and not job["status"]["active"]
        and UUID.fullmatch(uid := str((job["metadata"].get("labels") or {}).get(labels.UID_LABEL, "")))
    }
