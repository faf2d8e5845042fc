"""`{{ job|queue_text }}`: the queue line of a queued job (position, reason, estimate, hints)."""

from __future__ import annotations

from datetime import datetime

from django import template

from workloads.models import Job
from workloads.queue_selectors import queue_summary

register = template.Library()


@register.filter
def queue_text(job: Job) -> str:
    q = queue_summary(job)
    if q is None:
        return ""
    text = (f"#{q['position']}: " if q["position"] else "") + str(q["reason"])
    if q["estimated_start"]:
        start = datetime.fromisoformat(q["estimated_start"])
        text += f" · starts ≈ {start:%Y-%m-%d %H:%M} UTC"
    if q["hints"]:
        text += " · " + "; ".join(q["hints"])
    return text
