"""Telling people what happened to their jobs: email to the owner, for the kinds of event they chose
(accounts.choices.NotifyEvent, all on by default), and the project's webhook, if its managers set
one, for every event.

Callers (transitions, the queue's notices and preemptions, GPU-failure requeues, the idle sweep)
send `kind`, the end of the sentence "Your job ... <kind>". Which event it is follows from that
wording: exact for the fixed kinds, by prefix for those that carry a time or a GPU. The tests drive
each caller, so a reworded kind that no longer maps fails there rather than going out as a
"job.notice".
"""

from __future__ import annotations

from typing import NamedTuple

from django.conf import settings
from django.core.mail import send_mail

from accounts import webhooks
from accounts.choices import NotifyEvent
from accounts.choices import TaskName as AccountsTask
from workloads.choices import JobState
from workloads.models import Job
from workloads.services.publisher import send_on_commit
from workloads.services.transitions import NOTIFY_ON

IDLE_WARNING = "has idle GPUs: it will be suspended unless they get busy or you snooze the warning"
IDLE_SUSPENDED = "was suspended because its GPUs stayed idle; resume it to queue it again"
# A job of several workers (services.workers): every worker idle after being busy.
WORKERS_HUNG = "has every worker's GPUs idle after being busy: a collective may be hung"


class Event(NamedTuple):
    webhook: str  # X-GPU-Portal-Event and the body's "event"
    choice: NotifyEvent | None  # the owner's email choice that covers it (None: only the master switch)


EXACT = {
    NOTIFY_ON[JobState.RUNNING]: Event("job.started", NotifyEvent.STARTED),
    NOTIFY_ON[JobState.SUCCEEDED]: Event("job.succeeded", NotifyEvent.FINISHED),
    NOTIFY_ON[JobState.FAILED]: Event("job.failed", NotifyEvent.FAILED),
    NOTIFY_ON[JobState.LOST]: Event("job.lost", NotifyEvent.FAILED),
    IDLE_WARNING: Event("job.idle_warning", NotifyEvent.IDLE),
    IDLE_SUSPENDED: Event("job.idle_suspended", NotifyEvent.IDLE),
    WORKERS_HUNG: Event("job.workers_hung", NotifyEvent.IDLE),
}
PREFIXES = (
    ("will be preempted at ", Event("job.preemption_notice", NotifyEvent.PREEMPTION)),  # services.queue
    ("was preempted", Event("job.preempted", NotifyEvent.PREEMPTION)),  # services.queue
    ("was stopped because GPU ", Event("job.gpu_requeue", NotifyEvent.GPU_REQUEUE)),  # gpu_failures
    ("had a worker fail; ", Event("job.workers_restart", NotifyEvent.FAILED)),  # services.workers
)
OTHER = Event("job.notice", None)


def event_of(kind: str) -> Event:
    """The event a notification `kind` stands for."""
    if kind in EXACT:
        return EXACT[kind]
    return next((event for prefix, event in PREFIXES if kind.startswith(prefix)), OTHER)


def job_notify(*, job_id: int, kind: str) -> None:
    """Tell the owner (email, if they chose this kind of event) and the project's webhook (if one is
    set) that the job ... <kind>; the job is read once for both."""
    job = Job.objects.select_related("owner", "project").filter(pk=job_id).first()
    if job is not None:
        event = event_of(kind)
        _email(job, kind, event)
        _webhook(job, kind, event)


def _email(job: Job, kind: str, event: Event) -> None:
    if not job.owner.emails_about(event.choice.value if event.choice else ""):
        return
    subject = f"[GPU portal] job {job} {kind}"
    lines = [
        f"Your job {job} in project {job.project.slug} {kind}.",
        f"State: {job.state} ({job.state_reason})",
    ]
    if job.exit_code is not None:
        lines.append(f"Exit code: {job.exit_code}")
    lines.append("Choose which job events email you on the portal's Notifications page (/me/notifications/).")
    send_mail(subject, "\n".join(lines), settings.DEFAULT_FROM_EMAIL, [job.owner.email])


def _webhook(job: Job, kind: str, event: Event) -> None:
    """Queue the event for the project's webhook (delivered, signed and retried by its own task)."""
    payload = {
        "job": {
            "uid": str(job.uid),
            "name": str(job),
            "project": job.project.slug,
            "owner": job.owner.email,
            "state": job.state,
            "reason": job.state_reason,
            "exit_code": job.exit_code,
        },
        "what": kind,
    }
    delivery = webhooks.delivery_create(project=job.project, event=event.webhook, payload=payload)
    if delivery is not None:
        send_on_commit(AccountsTask.DELIVER_WEBHOOK, delivery.pk)
