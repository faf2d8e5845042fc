"""Telling people what happened to their jobs: email to the owner, if they asked for it."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail

from workloads.models import Job


def job_email(*, job_id: int, kind: str) -> bool:
    """Mail the owner "your job ... <kind>"; False when the job is gone or they opted out."""
    job = Job.objects.select_related("owner", "project").filter(pk=job_id).first()
    if job is None or not job.owner.notify_by_email:
        return False
    subject = f"[GPU portal] job {job} {kind}"
    lines = [
        f"Your job {job} in project {job.project.slug} {kind}.",
        f"State: {job.state} ({job.state_reason})",
    ]
    if job.exit_code is not None:
        lines.append(f"Exit code: {job.exit_code}")
    send_mail(subject, "\n".join(lines), settings.DEFAULT_FROM_EMAIL, [job.owner.email])
    return True
