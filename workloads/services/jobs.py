"""Writes for jobs: keyword-only, typed, audited, and never a cluster call.

A submission is one transaction: the Job row, its first event, the audit row and the outbox row
commit together; the cluster hears about it only after commit (publisher.outbox_write). Rejected
input raises ValidationError({field: [...]}) before anything is written.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpRequest

from accounts.audit import audit_record, snapshot
from accounts.models import Project, Quota, User
from accounts.selectors import can_submit
from workloads import app_settings
from workloads.choices import EventKind, JobState
from workloads.models import ImageRule, Job, JobEvent, ProjectVolume, QueueSettings
from workloads.selectors import can_act_on_job
from workloads.services.publisher import outbox_write
from workloads.services.transitions import job_transition
from workloads.spec import JobSpec, SpecLimits, parse_spec, quota_maxima, quota_totals, spec_request

AUDIT_EXCLUDE = ("log_tail",)


def spec_limits(*, project: Project) -> SpecLimits:
    quota = Quota.objects.filter(project=project).first() or Quota(project=project)
    rules = frozenset(ImageRule.objects.filter(project=project).values_list("registry", "repository"))
    volumes = dict(ProjectVolume.objects.filter(project=project).values_list("name", "read_only"))
    return SpecLimits(
        images=rules,
        volumes=volumes,
        maxima=quota_maxima(quota),
        totals=quota_totals(quota),
        simulation=app_settings.simulation(),
        real_node=app_settings.real_node_placement(),
    )


def require_submitter(*, actor: User, project: Project) -> None:
    if not can_submit(user=actor, project=project):
        raise PermissionDenied("Viewers can read this project's jobs but not submit or cancel them.")


def require_job_actor(*, actor: User, job: Job) -> None:
    if not can_act_on_job(user=actor, job=job):
        raise PermissionDenied(
            "Members cancel and rerun their own jobs; a manager of the project can act on anyone's."
        )


class QueueFull(Exception):
    """The project, or the user in it, already has as many queued jobs as the operators allow."""


def _require_queue_room(*, actor: User, project: Project) -> None:
    limits = QueueSettings.load()
    queued = Job.objects.filter(project=project, state=JobState.QUEUED).aggregate(
        mine=Count("id", filter=Q(owner=actor)), all=Count("id")
    )
    if queued["mine"] >= limits.max_queued_per_user:
        raise QueueFull(
            f"You already have {limits.max_queued_per_user} queued jobs in {project.slug}, the most "
            "allowed; wait for some to start or cancel some, then submit again."
        )
    if queued["all"] >= limits.max_queued_per_project:
        raise QueueFull(
            f"Project {project.slug} already has {limits.max_queued_per_project} queued jobs, the most "
            "allowed; wait for some to start or cancel some, then submit again."
        )


def job_submit(
    *,
    actor: User,
    project: Project,
    data: Any,
    rerun_of: Job | None = None,
    request: HttpRequest | None = None,
) -> Job:
    """Validate the typed request, then save the job, its outbox row and its audit row at once."""
    require_submitter(actor=actor, project=project)
    spec = parse_spec(data, spec_limits(project=project))
    _require_queue_room(actor=actor, project=project)
    return _job_create(actor=actor, project=project, spec=spec, rerun_of=rerun_of, request=request)


def _job_create(
    *, actor: User, project: Project, spec: JobSpec, rerun_of: Job | None, request: HttpRequest | None
) -> Job:
    job = Job(project=project, owner=actor, rerun_of=rerun_of, **Job.spec_columns(spec))
    # The fields' own validators only. The related rows are in hand (checking that they exist cost a
    # query each), the uid is a fresh uuid4, and the spec parser refuses GPUs with slices by name: the
    # unique index and the check constraint still hold in the database.
    in_hand = ["project", "owner", "rerun_of"]
    job.full_clean(exclude=in_hand, validate_unique=False, validate_constraints=False)
    # Part of the caller's transaction (the request's): an error here undoes the whole submission.
    with transaction.atomic(savepoint=False):
        job.save()
        why = f"rerun of {rerun_of.k8s_name}" if rerun_of else "submitted"
        JobEvent.objects.create(job=job, kind=EventKind.TRANSITION, to_state=JobState.QUEUED, reason=why)
        audit_record(
            actor=actor,
            action="job.submit",
            obj=job,
            project=project,
            after=snapshot(job, exclude=AUDIT_EXCLUDE),
            request=request,
        )
        outbox_write(job.pk)
    return job


def job_spec_request(job: Job) -> dict[str, Any]:
    """The request that would make this job again (rerun, templates)."""
    return spec_request(job.job_spec())


def job_rerun(*, actor: User, job: Job, edits: Any = None, request: HttpRequest | None = None) -> Job:
    """A new job from an old one's spec, with an optional partial spec of edits on top."""
    if edits is not None and not isinstance(edits, dict):
        raise ValidationError({"non_field_errors": ["Edits must be a JSON object of spec fields."]})
    require_job_actor(actor=actor, job=job)
    data = {**job_spec_request(job), **(edits or {})}
    return job_submit(actor=actor, project=job.project, data=data, rerun_of=job, request=request)


def job_cancel(*, actor: User, job: Job, request: HttpRequest | None = None) -> Job:
    """Cancel: the row moves at once; the reconciler deletes the cluster Job (background propagation)."""
    require_job_actor(actor=actor, job=job)
    if job.is_terminal:
        raise ValidationError({"state": [f"The job already ended ({job.state})."]})
    with transaction.atomic():
        before = {"state": job.state}
        if not job_transition(job=job, to=JobState.CANCELLED, reason=f"cancelled by {actor}", actor=actor):
            raise ValidationError({"state": ["The job changed state meanwhile; reload and retry."]})
        audit_record(
            actor=actor,
            action="job.cancel",
            obj=job,
            project=job.project,
            before=before,
            after={"state": job.state},
            request=request,
        )
        outbox_write(job.pk)
    return job
