"""Reads for jobs, templates and the queue. Tenancy lives here: a job of a project the user cannot see
does not exist."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from accounts.choices import Role
from accounts.models import Project, Quota, User
from accounts.selectors import is_operator, project_list, project_role
from workloads.choices import ACTIVE_STATES, TERMINAL_STATES, JobState
from workloads.idle_rules import reclaimed_gpu_hours
from workloads.k8s.reconcilers.namespace import Tenant
from workloads.messages import JobStateMessage, QueueSummary, queue_summary_of, reason_line
from workloads.models import GrantStatus, ImageRule, Job, JobEvent, JobTemplate, ProjectVolume, QuotaGrant


def job_list(*, user: User, state: str | None = None, project: str | None = None) -> QuerySet[Job]:
    qs = Job.objects.select_related("project", "owner").filter(project__in=project_list(user=user))
    if state:
        qs = qs.filter(state=state)
    if project:
        qs = qs.filter(project__slug=project)
    return qs.defer("log_tail")


def job_get(*, user: User, uid: Any) -> Job:
    try:
        job = (
            Job.objects.select_related("project", "owner")
            .filter(project__in=project_list(user=user), uid=uid)
            .first()
        )
    except Exception as exc:  # a malformed UUID is simply not found
        raise Http404("No such job.") from exc
    if job is None:
        raise Http404("No such job.")
    return job


def can_act_on_job(*, user: User, job: Job) -> bool:
    """Cancel or rerun: operators and the project's managers on every job, members on their own,
    viewers never. The same answer for pages, API, CLI."""
    if is_operator(user):
        return True
    role = project_role(user=user, project=job.project)
    return role == Role.MANAGER or (role == Role.MEMBER and job.owner_id == user.pk)


def jobs_with_project() -> QuerySet[Job]:
    """Jobs as the workers, the controller and the log streams read them: with their project, without
    the kept log (up to 256 KiB a finished job), which only the log's own reads load."""
    return Job.objects.select_related("project").defer("log_tail")


def job_of_uid(*, uid: str) -> Job | None:
    """The job with this uid (the cluster's label), whoever owns it, loaded as a reconcile reads it,
    or None: one query, where an id lookup and then the load would be two."""
    return jobs_with_project().filter(uid=uid).first()


def job_events(*, job: Job) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job).order_by("at", "id")


def template_list(*, user: User, project: str | None = None) -> QuerySet[JobTemplate]:
    qs = JobTemplate.objects.select_related("project").filter(project__in=project_list(user=user))
    return qs.filter(project__slug=project) if project else qs


def template_get(*, user: User, pk: int) -> JobTemplate:
    template = template_list(user=user).filter(pk=pk).first()
    if template is None:
        raise Http404("No such template.")
    return template


def submit_catalog(*, projects: list[Project]) -> dict[str, dict[str, Any]]:
    """Per project slug, what a job there may use: allowed images ("registry/repository") and
    volumes (name -> read-only enforced). Two queries, whatever the number of projects."""
    catalog: dict[str, dict[str, Any]] = {p.slug: {"images": [], "volumes": {}} for p in projects}
    for slug, registry, repository in ImageRule.objects.filter(project__in=projects).values_list(
        "project__slug", "registry", "repository"
    ):
        catalog[slug]["images"].append(f"{registry}/{repository}")
    for slug, name, read_only in ProjectVolume.objects.filter(project__in=projects).values_list(
        "project__slug", "name", "read_only"
    ):
        catalog[slug]["volumes"][name] = read_only
    return catalog


def quota_usage(*, project: Project) -> dict[str, int]:
    """What the project's admitted and running jobs hold now."""
    agg = Job.objects.filter(project=project, state__in=ACTIVE_STATES).aggregate(
        gpus=Sum("gpus"),
        mps_slices=Sum("mps_slices"),
        cpu_millicores=Sum("cpu_millicores"),
        memory_mib=Sum("memory_mib"),
        jobs=Count("id"),
    )
    return {key: int(value or 0) for key, value in agg.items()}


def my_active_jobs(*, user: User, limit: int = 50) -> list[Job]:
    """The user's own queued, admitted and running jobs, newest first (the home page)."""
    states = (JobState.QUEUED, JobState.ADMITTED, JobState.RUNNING)
    return list(job_list(user=user).filter(owner=user, state__in=states).order_by("-submitted_at")[:limit])


def my_idle_notices(*, user: User) -> list[tuple[Job, str]]:
    """The user's unfinished jobs the idle sweeps flagged, each with what it means for them."""
    flagged = (
        job_list(user=user)
        .filter(owner=user)
        .exclude(state__in=TERMINAL_STATES)
        .filter(
            Q(idle_warned_at__isnull=False)
            | Q(hang_noticed_at__isnull=False)
            | Q(idle_suspended_at__isnull=False)
        )
        .order_by("-submitted_at")[:20]
    )
    out = []
    for job in flagged:
        if job.idle_suspended_at:
            text = "suspended for idle GPUs: resume it on its page"
        elif job.hang_noticed_at:
            text = "every worker idle after being busy: a collective may be hung"
        else:
            text = "its GPUs are idle: it will be suspended unless they get busy or you snooze it"
        out.append((job, text))
    return out


def quota_use_list(*, projects: list[Project]) -> list[tuple[Project, list[tuple[str, int, int]]]]:
    """Each project's quota as (what, in use, total) rows: GPUs, MPS slices, CPU (millicores), memory
    (MiB); quotas of zero left out (the home page's bars)."""
    out = []
    for project, free in quota_headroom_list(projects=projects):
        quota = _quota_of(project)
        totals = {
            "GPUs": ("gpus", quota.gpus),
            "MPS slices": ("mps_slices", quota.mps_slices),
            "CPU (millicores)": ("cpu_millicores", quota.cpu_millicores),
            "Memory (MiB)": ("memory_mib", quota.memory_mib),
        }
        rows = [(what, total - free[key], total) for what, (key, total) in totals.items() if total]
        out.append((project, rows))
    return out


def quota_headroom_list(*, projects: list[Project]) -> list[tuple[Project, dict[str, int]]]:
    """Each project's quota headroom, in one query more (their quota rows come with them)."""
    rows = (
        Job.objects.filter(project__in=projects, state__in=ACTIVE_STATES)
        .order_by()
        .values("project_id")
        .annotate(
            gpus=Sum("gpus"),
            mps_slices=Sum("mps_slices"),
            cpu_millicores=Sum("cpu_millicores"),
            memory_mib=Sum("memory_mib"),
            jobs=Count("id"),
        )
    )
    used = {row.pop("project_id"): {k: int(v or 0) for k, v in row.items()} for row in rows}
    empty = dict.fromkeys(("gpus", "mps_slices", "cpu_millicores", "memory_mib", "jobs"), 0)
    return [(p, _free(_quota_of(p), used.get(p.pk, empty))) for p in projects]


def _quota_of(project: Project) -> Quota:
    try:
        return project.quota
    except Quota.DoesNotExist:
        return Quota(project=project)


def _free(quota: Quota, used: dict[str, int]) -> dict[str, int]:
    return {
        "gpus": quota.gpus - used["gpus"],
        "mps_slices": quota.mps_slices - used["mps_slices"],
        "cpu_millicores": quota.cpu_millicores - used["cpu_millicores"],
        "memory_mib": quota.memory_mib - used["memory_mib"],
        "jobs": quota.max_concurrent_jobs - used["jobs"],
    }


def queue_summary(job: Job) -> QueueSummary | None:
    """The `queue` object of a queued job (API, pages, websocket); None once it left the queue."""
    if job.state != JobState.QUEUED:
        return None
    return queue_summary_of(job.queue_explanation or {}, held=job.held)


def job_state_message(job: Job) -> JobStateMessage:
    """A job's state as the live pages receive it (`job_state_snapshot` on connect, then on change)."""
    return {
        "type": "job.state",
        "job": str(job.uid),
        "project": job.project.slug,
        "state": job.state,
        "reason": job.state_reason,
        "changed_at": job.state_changed_at.isoformat(),
        "exit_code": job.exit_code,
        "node": job.node,
        "queue": queue_summary(job),
        "reason_line": job_reason_line(job),
    }


def job_reason_line(job: Job) -> str:
    nodes = len(set(job.worker_nodes)) if job.workers > 1 else 1
    started = job.started_at.astimezone(UTC) if job.started_at else None
    return reason_line(
        state=job.state,
        state_reason=job.state_reason,
        node=job.node,
        nodes=nodes,
        started_at=started,
        queue=queue_summary(job),
    )


def job_state_snapshot(*, user: User, uids: Collection[str]) -> list[JobStateMessage]:
    """The current state of the jobs a page shows (`uids`) that the user may see: what a live socket
    sends first, so a change between the page's render and the socket's connect is not missed."""
    jobs = job_list(user=user).filter(uid__in=list(uids)).select_related("project").order_by("pk")
    return [job_state_message(job) for job in jobs]


def grant_list(*, user: User) -> QuerySet[QuotaGrant]:
    return QuotaGrant.objects.select_related("project", "requested_by").filter(
        project__in=project_list(user=user)
    )


def jobs_needing_reconcile(*, queued_at_rest: Collection[str] = ()) -> list[int]:
    """Every job the sweep must look at again: not terminal, or terminal with cluster work left.
    `queued_at_rest`: uids of jobs whose Kubernetes Job is suspended with no pod running, left out
    while the job is queued and recorded as made (nothing to converge)."""
    live = Job.objects.exclude(state__in=TERMINAL_STATES)
    if queued_at_rest:
        live = live.exclude(
            state=JobState.QUEUED, created_in_cluster_at__isnull=False, uid__in=list(queued_at_rest)
        )
    cancelled = Job.objects.filter(state=JobState.CANCELLED, deleted_in_cluster_at__isnull=True).values_list(
        "pk", flat=True
    )
    unlogged = (
        Job.objects.filter(state__in=TERMINAL_STATES, log_captured=False)
        .exclude(pod_name="")
        .values_list("pk", flat=True)
    )
    return sorted(set(live.values_list("pk", flat=True)) | set(cancelled) | set(unlogged))


def project_claims(*, project: Project) -> dict[str, ProjectVolume]:
    """The project's volumes by name: what a job's mounts may refer to."""
    return {v.name: v for v in ProjectVolume.objects.filter(project=project)}


def quota_extra(*, project: Project) -> tuple[int, int]:
    """GPUs and slices above the base quota that admission may have let through: active approved
    grants plus the project's admitted/running borrowing jobs."""
    now = timezone.now()
    grants = QuotaGrant.objects.filter(
        project=project, status=GrantStatus.APPROVED, starts_at__lte=now, until__gt=now
    ).aggregate(g=Coalesce(Sum("gpus"), 0), s=Coalesce(Sum("slices"), 0))
    borrowed = Job.objects.filter(project=project, borrowing=True, state__in=ACTIVE_STATES).aggregate(
        g=Coalesce(Sum("gpus"), 0), s=Coalesce(Sum("mps_slices"), 0)
    )
    return grants["g"] + borrowed["g"], grants["s"] + borrowed["s"]


def namespace_tenant(*, project: Project) -> Tenant:
    """Everything the project's namespace objects are built from, ResourceQuota extras included."""
    quota = Quota.objects.filter(project=project).first() or Quota(project=project)
    extra_gpus, extra_slices = quota_extra(project=project)
    return Tenant(project=project, quota=quota, extra_gpus=extra_gpus, extra_slices=extra_slices)


def idle_reclaimed_gpu_hours(*, job: Job, now: datetime | None = None) -> float:
    """GPU-hours the job gave back while suspended for idle GPUs: closed periods plus the open one."""
    hours = job.idle_reclaimed_gpu_hours
    if job.idle_suspended_at is not None:
        hours += reclaimed_gpu_hours(
            suspended_at=job.idle_suspended_at,
            until=job.finished_at or now or timezone.now(),
            started_at=job.started_at,
            max_runtime_s=job.max_runtime_minutes * 60,
            gpus=job.gpu_equivalent,
        )
    return hours


def project_idle_reclaimed_gpu_hours(*, project: Project, now: datetime | None = None) -> float:
    """The project's GPU-hours reclaimed from idle jobs (one aggregate, plus its few open suspensions)."""
    jobs = Job.objects.filter(project=project)
    closed = jobs.aggregate(total=Coalesce(Sum("idle_reclaimed_gpu_hours"), 0.0))["total"]
    open_ = jobs.filter(idle_suspended_at__isnull=False).defer("log_tail")
    return float(closed) + sum(
        idle_reclaimed_gpu_hours(job=j, now=now) - j.idle_reclaimed_gpu_hours for j in open_
    )


def project_idle_summary(*, project: Project, now: datetime | None = None) -> dict[str, Any]:
    """The project's reclaimed GPU-hours and its jobs warned or suspended now (usage page and API)."""
    jobs = Job.objects.filter(project=project)
    return {
        "reclaimed_gpu_hours": round(project_idle_reclaimed_gpu_hours(project=project, now=now), 4),
        "warned_jobs": jobs.filter(state=JobState.RUNNING, idle_warned_at__isnull=False).count(),
        "suspended_jobs": jobs.filter(state=JobState.PREEMPTED, idle_suspended_at__isnull=False).count(),
    }
