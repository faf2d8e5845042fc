"""Telling people what happened to their jobs: email to the owner, if they asked for it, and the
project's webhook, if its managers set one."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail

from accounts import webhooks
from accounts.choices import TaskName as AccountsTask
from workloads.models import Job
from workloads.services.publisher import send_on_commit

# Notices that are not a state change of their own get their own webhook event.
IDLE_WARNING = "has idle GPUs: it will be suspended unless they get busy or you snooze the warning"
IDLE_SUSPENDED = "was suspended because its GPUs stayed idle; resume it to queue it again"
EVENTS = {IDLE_WARNING: "job.idle_warning", IDLE_SUSPENDED: "job.idle_suspended"}


def job_notify(*, job_id: int, kind: str) -> None:
    """Tell the owner (email, if they asked for it) and the project's webhook (if one is set) that
    the job ... <kind>; the job is read once for both."""
    job = Job.objects.select_related("owner", "project").filter(pk=job_id).first()
    if job is not None:
        _email(job, kind)
        _webhook(job, kind)


def _email(job: Job, kind: str) -> None:
    if not job.owner.notify_by_email:
        return
    subject = f"[GPU portal] job {job} {kind}"
    lines = [
        f"Your job {job} in project {job.project.slug} {kind}.",
        f"State: {job.state} ({job.state_reason})",
    ]
    if job.exit_code is not None:
        lines.append(f"Exit code: {job.exit_code}")
    send_mail(subject, "\n".join(lines), settings.DEFAULT_FROM_EMAIL, [job.owner.email])


def _webhook(job: Job, kind: str) -> None:
    """Queue the event for the project's webhook (delivered, signed and retried by its own task)."""
    payload = {
        "job": {"uid": str(job.uid), "name": str(job), "project": job.project.slug, "owner": job.owner.email,
                "state": job.state, "reason": job.state_reason, "exit_code": job.exit_code},
        "what": kind,
    }  # fmt: skip
    delivery = webhooks.delivery_create(
        project=job.project, event=EVENTS.get(kind, f"job.{job.state}"), payload=payload
    )
    if delivery is not None:
        send_on_commit(AccountsTask.DELIVER_WEBHOOK, delivery.pk)
