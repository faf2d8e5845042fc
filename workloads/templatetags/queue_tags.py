"""`{{ job|queue_text }}`: the queue line of a queued job (position, reason, estimate, hints)."""

from __future__ import annotations

from django import template

from workloads.models import Job
from workloads.selectors import queue_summary

register = template.Library()


@register.filter
def queue_text(job: Job) -> str:
    q = queue_summary(job)
    return q["text"] if q is not None else ""
