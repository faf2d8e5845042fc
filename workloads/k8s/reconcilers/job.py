"""One portal job against its Kubernetes Job: create suspended, (un)suspend, delete, observe.

Steps of `JobReconciler.run()` (each is idempotent, so a worker killed anywhere is harmless):

1. Cancelled: keep the log, delete the Job with background propagation (404 = done).
2. Missing in the cluster and never created: create it suspended (409 AlreadyExists = done), and
   record that it exists. Missing after it was created: report "unknown", never "failed" (R4).
3. `spec.suspend` follows the portal: false once admitted, true while queued or preempted.
4. Observe Job conditions and the pod, move the row forward by compare-and-swap.
5. Finished: keep the last part of the log in the row so it outlives the pod.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import Q
from django.utils import timezone

from workloads import app_settings
from workloads.choices import TERMINAL_STATES, JobState
from workloads.dispatch import outbox_done
from workloads.k8s import builders, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError
from workloads.k8s.faults import fault_point
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler
from workloads.k8s.reconcilers.namespace import reconcile_namespace, reconcile_quota
from workloads.k8s.status import Observation, observe
from workloads.models import Job, JobEvent, ProjectVolume
from workloads.transitions import job_note, job_transition

log = logging.getLogger(__name__)
RUNS_IN_CLUSTER = frozenset({JobState.ADMITTED, JobState.RUNNING})


class JobReconciler(Reconciler[Job]):
    kind = "Job"

    @property
    def path(self) -> str:
        return paths.job(self.owner.namespace, self.owner.k8s_name)

    @property
    def collection(self) -> str:
        return paths.jobs(self.owner.namespace)

    def desired(self) -> Obj:
        claims = {v.name: v for v in ProjectVolume.objects.filter(project=self.owner.project)}
        return builders.build_job(self.owner, claims=claims)

    def want_suspended(self) -> bool:
        return self.owner.state not in RUNS_IN_CLUSTER

    def reconcile(self, current: Obj, desired: Obj) -> None:
        if bool((current.get("spec") or {}).get("suspend")) != self.want_suspended():
            raise NeedsUpdate

    def _quota_first(self) -> None:
        """A borrowing job's GPUs are above the base quota: raise the ResourceQuota before its pods."""
        if self.owner.borrowing and not self.want_suspended():
            reconcile_quota(self.owner.project, self.client)

    def update(self, current: Obj, desired: Obj) -> Obj:
        self._quota_first()
        return self.client.patch(self.path, {"spec": {"suspend": self.want_suspended()}})

    def create(self, desired: Obj) -> Obj | None:
        self._quota_first()
        try:
            created = self.client.create(self.collection, desired)
        except K8sError as exc:
            if exc.status != 404:  # 404: the namespace is missing; make it and retry once
                raise
            reconcile_namespace(self.owner.project, self.client)
            created = self.client.create(self.collection, desired)
        fault_point("after_create")
        Job.objects.filter(pk=self.owner.pk, created_in_cluster_at__isnull=True).update(
            created_in_cluster_at=timezone.now()
        )
        return created

    def pods(self) -> list[Obj]:
        selector = f"{builders.UID_LABEL}={self.owner.uid}"
        body = self.client.get(paths.pods(self.owner.namespace), {"labelSelector": selector})
        return list((body or {}).get("items") or [])

    def run(self) -> None:
        job = self.owner
        if job.state == JobState.CANCELLED:
            self._cancel()
            return
        current = self.current()
        if current is None and job.created_in_cluster_at is None and not job.is_terminal:
            self.create(self.desired())
            if Job.objects.filter(pk=job.pk, state=JobState.CANCELLED).exists():
                self._cancel(force=True)  # cancelled while we were creating: take it back
                return
            current = self.current()
        elif current is None:
            self._missing()
            return
        elif job.created_in_cluster_at is None:  # created by an attempt that died before recording it
            Job.objects.filter(pk=job.pk, created_in_cluster_at__isnull=True).update(
                created_in_cluster_at=timezone.now()
            )
        if current is not None and not job.is_terminal:
            try:
                self.reconcile(current, {})
            except NeedsUpdate:
                current = self.update(current, {})
            fault_point("after_suspend_patch")
        self._observe(current)
        outbox_done(job.pk)

    def _observe(self, current: Obj | None) -> None:
        job = self.owner
        obs = observe(current, self.pods() if current is not None else [])
        _apply_observation(job, obs)
        job.refresh_from_db()
        if job.state in TERMINAL_STATES and not job.log_captured:
            capture_log(job, self.client)

    def _missing(self) -> None:
        job = self.owner
        if job.is_terminal:
            outbox_done(job.pk)
            return
        reason = "unknown: the Kubernetes Job is gone and its outcome was not seen"
        if not JobEvent.objects.filter(job=job, reason=reason[:120]).exists():
            job_note(job=job, reason=reason[:120], message=reason)
        outbox_done(job.pk)

    def _cancel(self, *, force: bool = False) -> None:
        job = self.owner
        if force or job.deleted_in_cluster_at is None:
            if job.pod_name and not job.log_captured:
                capture_log(job, self.client)
            self.delete()
            fault_point("after_delete")
            Job.objects.filter(pk=job.pk).update(deleted_in_cluster_at=timezone.now())
        outbox_done(job.pk)


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
    if obs.state == JobState.RUNNING or job.started_at is None:
        extra["started_at"] = obs.started_at
    if obs.state in TERMINAL_STATES and job.state in (JobState.QUEUED, JobState.ADMITTED) and obs.started_at:
        Job.objects.filter(pk=job.pk, started_at__isnull=True).update(started_at=obs.started_at)
    job_transition(job=job, to=obs.state, reason=obs.reason or obs.state, **extra)


def capture_log(job: Job, client: KubeClient) -> None:
    """Keep the end of the pod's log (app_settings.log_tail_bytes) in the row."""
    text, truncated = "", False
    if job.pod_name:
        try:
            data = client.read_bytes(paths.pod_log(job.namespace, job.pod_name), {"container": "main"})
        except K8sError as exc:
            if exc.status not in (400, 404):  # the node may be back later: the sweep retries
                log.warning("log of %s not readable yet: %s", job, exc)
                return
            data = b""
        limit = app_settings.log_tail_bytes()
        truncated = len(data) > limit
        text = data[-limit:].decode(errors="replace")
    Job.objects.filter(pk=job.pk).filter(Q(log_captured=False)).update(
        log_tail=text, log_truncated=truncated, log_captured=True
    )
    job.log_captured = True
