"""`{{ job|queue_text }}`: the queue line of a queued job (position, reason, estimate, hints);
`{{ job|reason_text }}`: why a job is where it is, in words people read."""

from __future__ import annotations

from django import template

from workloads.models import Job
from workloads.selectors import job_reason_line, queue_summary

register = template.Library()


@register.filter
def reason_text(job: Job) -> str:
    return job_reason_line(job)


@register.filter
def queue_text(job: Job) -> str:
    q = queue_summary(job)
    return q["text"] if q is not None else ""
