"""Idle-GPU reclaim: the periodic sweep that warns, withdraws and suspends (workloads.idle_rules decides).

1. Read the running GPU jobs old enough to be judged, and one grouped query over the raw samples of
   the window (`gpu.selectors.pod_activity`): per (pod, GPU) the highest SM utilisation and the range
   of memory used. Samples are matched to jobs by pod name and namespace, as the peaks are.
2. Each verdict is applied by compare-and-swap on the idle fields (a snooze or a second sweep racing
   it loses nothing): a warning (timeline, audit, email, webhook `job.idle_warning`), a withdrawal, or
   a suspension: the job moves to PREEMPTED with `idle_suspended_at`, the reconciler re-suspends its
   Kubernetes Job (pods gone, not killed as a failure) and the queue leaves it there until its owner
   resumes it (`services.idle_actions.job_idle_resume`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from accounts.audit import audit_record
from gpu.selectors import PodActivity, pod_activity
from workloads.choices import JobState
from workloads.idle_rules import Action, JobIdle, Thresholds, Verdict, decide
from workloads.models import Job, QueueSettings
from workloads.services.notifications import IDLE_SUSPENDED, IDLE_WARNING
from workloads.services.peaks import POD_RE
from workloads.services.publisher import job_notify, outbox_write
from workloads.services.queue import NOTICE_FIELDS
from workloads.services.transitions import job_note, job_transition


def thresholds(row: QueueSettings) -> Thresholds:
    return Thresholds(
        util_pct=row.idle_util_pct,
        mem_change_pct=row.idle_mem_change_pct,
        window_s=row.idle_window_s,
        warning_s=row.idle_warning_s,
        max_snoozes=row.idle_max_snoozes,
    )


@dataclass(frozen=True)
class Policy:
    """How one kind of job is judged: batch jobs, or interactive ones (their own window; with 0,
    never reclaimed: like an exempt job, a warning they still carry is withdrawn)."""

    interactive: bool
    t: Thresholds
    all_exempt: bool = False


def policies(row: QueueSettings) -> tuple[Policy, Policy]:
    batch, window = thresholds(row), row.idle_interactive_window_s
    return Policy(False, batch), Policy(True, replace(batch, window_s=window or batch.window_s), window == 0)


def _candidates(now: datetime, policy: Policy) -> list[Job]:
    jobs = Job.objects.select_related("project").filter(state=JobState.RUNNING, started_at__isnull=False)
    jobs = jobs.exclude(gpus=0, mps_slices=0).filter(interactive=policy.interactive)
    if policy.all_exempt:
        return list(jobs.filter(idle_warned_at__isnull=False))
    jobs = jobs.filter(started_at__lte=now - timedelta(seconds=policy.t.window_s))
    return list(jobs.exclude(idle_exempt=True, idle_warned_at__isnull=True))


def activity_by_job(jobs: list[Job], rows: list[PodActivity]) -> dict[int, list[PodActivity]]:
    """The sweep's activity rows (per pod and GPU) of each job, by job id; a pod is matched to its job
    by name and namespace."""
    by_uid = {str(job.uid): job for job in jobs}
    out: dict[int, list[PodActivity]] = {job.pk: [] for job in jobs}
    for row in rows:
        match = POD_RE.match(row.pod)
        job = by_uid.get(match.group(1)) if match else None
        if job is not None and row.namespace == job.namespace:  # a pod name in another tenant's namespace
            out[job.pk].append(row)
    return out


def idle_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Judge every running GPU job once; returns how many were warned, withdrawn and suspended."""
    now = now or timezone.now()
    row = QueueSettings.load()
    counts = {action.value: 0 for action in Action if action is not Action.NONE}
    if not row.idle_reclaim_enabled:
        return counts
    for policy in policies(row):
        for action in _judge(policy, now):
            counts[action.value] += 1
    return counts


def _judge(policy: Policy, now: datetime) -> list[Action]:
    """The actions applied to the jobs `policy` covers."""
    jobs, t = _candidates(now, policy), policy.t
    since = now - timedelta(seconds=t.window_s)
    activity = activity_by_job(
        jobs, pod_activity(namespaces=sorted({j.namespace for j in jobs}), since=since, until=now)
    )
    done: list[Action] = []
    for job in jobs:
        exempt = job.idle_exempt or policy.all_exempt
        state = JobIdle(job.started_at or now, job.idle_reset_at, job.idle_warned_at, exempt)
        verdict = decide(state, activity[job.pk], now=now, t=t)
        if verdict.action is not Action.NONE and APPLY[verdict.action](job, verdict, now):
            done.append(verdict.action)
    return done


def _warn(job: Job, verdict: Verdict, now: datetime) -> bool:
    with transaction.atomic():
        rows = Job.objects.filter(pk=job.pk, state=JobState.RUNNING, idle_warned_at__isnull=True)
        if not rows.update(idle_warned_at=now):
            return False
        job_note(job=job, reason="idle warning", message=verdict.reason)
        audit_record(
            actor=None, action="job.idle_warn", obj=job, project=job.project, after={"why": verdict.reason}
        )
        job_notify(job.pk, IDLE_WARNING)
    return True


def _withdraw(job: Job, verdict: Verdict, now: datetime) -> bool:
    with transaction.atomic():
        if not Job.objects.filter(pk=job.pk, idle_warned_at=job.idle_warned_at).update(idle_warned_at=None):
            return False
        job_note(job=job, reason="idle warning withdrawn", message=verdict.reason)
        audit_record(actor=None, action="job.idle_withdraw", obj=job, project=job.project)
    return True


def _suspend(job: Job, verdict: Verdict, now: datetime) -> bool:
    """Suspended, not killed: PREEMPTED keeps the job and its place; the reconciler re-suspends the Job."""
    with transaction.atomic():
        # The row lock makes a snooze landing now wait, then find the job suspended (and refuse).
        if not list(Job.objects.select_for_update().filter(pk=job.pk, idle_warned_at=job.idle_warned_at)):
            return False  # snoozed (or withdrawn) since this sweep read it
        why = f"suspended: {verdict.reason}"
        if not job_transition(job=job, to=JobState.PREEMPTED, reason=why, at=now):
            return False
        fields = dict.fromkeys(NOTICE_FIELDS)
        Job.objects.filter(pk=job.pk).update(
            **fields, borrowing=False, idle_warned_at=None, idle_suspended_at=now
        )
        audit_record(actor=None, action="job.idle_suspend", obj=job, project=job.project, after={"why": why})
        outbox_write(job.pk)
        job_notify(job.pk, IDLE_SUSPENDED)
    return True


APPLY = {Action.WARN: _warn, Action.WITHDRAW: _withdraw, Action.SUSPEND: _suspend}
