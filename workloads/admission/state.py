"""Reads that turn the database (and the live node list) into the policy's `ClusterState`.

Pending = queued jobs; running = admitted, running and unknown jobs (they hold quota). Notices are the
stored preemption deadlines. Owners are keyed by user id, projects by slug.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime

from accounts.models import GpuTypeLimit, Quota
from accounts.models import UserCap as UserCapRow
from gpu import selectors as gpu_selectors
from workloads import app_settings
from workloads.accounting import expected_runtimes, fair_share_usage
from workloads.admission.live import LiveCluster, Reserved, node_states
from workloads.choices import ACTIVE_STATES, PRIORITY_RANK, JobState, Priority
from workloads.models import GrantStatus, Job, QueueSettings, QuotaGrant
from workloads.queue import (
    ClusterState,
    Grant,
    NodeState,
    PendingJob,
    PreemptionNotice,
    ProjectQuota,
    RunningJob,
    Settings,
    UserCap,
)
from workloads.selectors import jobs_with_project

UNLIMITED = 1_000_000


def queue_settings() -> Settings:
    row = QueueSettings.load()
    return Settings(
        half_life_hours=row.half_life_hours,
        borrowing_enabled=row.borrowing_enabled,
        preemption_notice_s=row.preemption_notice_s,
        slices_per_gpu=app_settings.mps_slices_per_gpu(),
        workers_hold_after_s=row.workers_hold_after_s,
    )


def pending_of(job: Job) -> PendingJob:
    return PendingJob(
        id=job.pk,
        project=job.project.slug,
        owner=str(job.owner_id),
        submitted_at=job.submitted_at,
        gpus=job.gpus,
        slices=job.mps_slices,
        gpu_type=job.gpu_type or None,
        priority=PRIORITY_RANK.get(Priority(job.priority), 0),
        preemptible=job.preemptible,
        max_runtime_s=job.max_runtime_minutes * 60,
        held=job.held,
        front=job.queue_front,
        cpu_millicores=job.cpu_millicores,
        memory_mib=job.memory_mib,
        placement=job.placement,
        workers=job.workers,
    )


def running_of(job: Job, now: datetime) -> RunningJob:
    return RunningJob(
        id=job.pk,
        project=job.project.slug,
        owner=str(job.owner_id),
        node=job.node or job.planned_node,
        started_at=job.started_at or job.admitted_at or now,
        gpus=job.gpus,
        slices=job.mps_slices,
        gpu_type=job.gpu_type or None,
        max_runtime_s=job.max_runtime_minutes * 60,
        borrowing=job.borrowing,
        preemptible=job.preemptible,
        cpu_millicores=job.cpu_millicores,
        memory_mib=job.memory_mib,
        workers=job.workers,
        nodes=tuple(job.planned_nodes) if job.workers > 1 else (),
        name=str(job),
    )


def _grants(now: datetime) -> dict[int, list[Grant]]:
    out: dict[int, list[Grant]] = {}
    rows = QuotaGrant.objects.filter(status=GrantStatus.APPROVED, until__gt=now)
    for g in rows:
        grant = Grant(g.pk, g.gpus, g.slices, g.until, g.starts_at, g.gpu_type or None)
        out.setdefault(g.project_id, []).append(grant)
    return out


def _caps() -> dict[int, dict[str, UserCap]]:
    out: dict[int, dict[str, UserCap]] = {}
    for c in UserCapRow.objects.all():
        cap = UserCap(
            c.gpus if c.gpus is not None else UNLIMITED,
            c.mps_slices if c.mps_slices is not None else UNLIMITED,
            c.max_concurrent_jobs if c.max_concurrent_jobs is not None else UNLIMITED,
        )
        out.setdefault(c.project_id, {})[str(c.user_id)] = cap
    return out


def project_quotas(now: datetime) -> dict[str, ProjectQuota]:
    grants, caps = _grants(now), _caps()
    types: dict[int, dict[str, int]] = {}
    for limit in GpuTypeLimit.objects.all():
        types.setdefault(limit.quota_id, {})[limit.gpu_type] = limit.gpus
    out = {}
    for q in Quota.objects.select_related("project").filter(project__is_active=True):
        out[q.project.slug] = ProjectQuota(
            project=q.project.slug,
            gpus=q.gpus,
            slices=q.mps_slices,
            max_concurrent_jobs=q.max_concurrent_jobs,
            gpu_types=types.get(q.pk, {}),
            user_caps=caps.get(q.project_id, {}),
            grants=tuple(grants.get(q.project_id, ())),
            # The ResourceQuota's requests.cpu and requests/limits.memory (k8s/builders.py): grants
            # and borrowing raise only its GPU lines, so these are hard.
            cpu_millicores=q.cpu_millicores,
            memory_mib=q.memory_mib,
        )
    return out


def _notices(running: list[Job]) -> tuple[PreemptionNotice, ...]:
    return tuple(
        PreemptionNotice(
            j.pk, j.preempt_for or 0, j.preempt_notice_at or j.preempt_deadline, j.preempt_deadline
        )
        for j in running
        if j.preempt_deadline is not None
    )


def _reserved(active: list[Job], bound: set[tuple[str, int]]) -> dict[str, Reserved]:
    """Node -> what the admitted jobs' workers planned there hold while their pods are not bound."""
    out: dict[str, Reserved] = {}
    for job in active:
        for index, node in enumerate(job.planned_nodes):
            if (str(job.uid), index) in bound:
                continue
            was = out.get(node, Reserved())
            out[node] = Reserved(
                was.gpus + job.gpus,
                was.slices + job.mps_slices,
                was.cpu_millicores + job.cpu_millicores,
                was.memory_mib + job.memory_mib,
            )
    return out


def _reserved_tenants(active: list[Job], bound: set[tuple[str, int]]) -> dict[str, Counter[str]]:
    """Node -> project -> its admitted MPS jobs planned there whose pods are not bound yet."""
    out: dict[str, Counter[str]] = {}
    for job in active:
        if job.mps_slices and job.planned_node and (str(job.uid), 0) not in bound:
            out.setdefault(job.planned_node, Counter())[job.project.slug] += 1
    return out


def with_slice_placement(running: list[RunningJob], nodes: tuple[NodeState, ...]) -> list[RunningJob]:
    """Give running MPS jobs a placement over their node's shared GPUs, filled in index order as
    `live.node_states` fills the slices in use (the cluster does not say which card a pod got).
    Only the estimate reads it: a job that ends gives its slices back to those cards."""
    sizes = {n.name: [s.total_slices for s in n.shared] for n in nodes}
    filled: dict[str, list[int]] = {}
    out = []
    for job in sorted(running, key=lambda r: r.id):
        cards = sizes.get(job.node)
        if not job.slices or not cards:
            out.append(job)
            continue
        used = filled.setdefault(job.node, [0] * len(cards))
        left, parts = job.slices, []
        for index, size in enumerate(cards):
            take = min(left, size - used[index])
            if take > 0:
                used[index] += take
                parts.append((index, take))
                left -= take
        out.append(replace(job, slice_placement=tuple(parts)))
    return out


def cluster_state(*, now: datetime, live: LiveCluster) -> ClusterState:
    """The whole input of one cycle. Call inside the admission transaction (DB reads only)."""
    settings = queue_settings()
    qs = jobs_with_project()
    pending = list(qs.filter(state=JobState.QUEUED).order_by("submitted_at", "id"))
    active = list(qs.filter(state__in=ACTIVE_STATES))
    bound = live.bound_workers()
    nodes = node_states(
        live,
        reserved=_reserved(active, bound),
        slices_per_gpu=settings.slices_per_gpu,
        slice_plan=gpu_selectors.shared_slices_by_node(),
        unoffered=gpu_selectors.unoffered_whole_by_node(),
        reserved_tenants=_reserved_tenants(active, bound),
        cross_project=gpu_selectors.cross_project_nodes(),
    )
    return ClusterState(
        pending=tuple(pending_of(j) for j in pending),
        running=tuple(with_slice_placement([running_of(j, now) for j in active], nodes)),
        nodes=nodes,
        quotas=project_quotas(now),
        usage=fair_share_usage(now=now, half_life_hours=settings.half_life_hours),
        settings=settings,
        notices=_notices(active),
        expected_runtime_s=expected_runtimes(),
    )
