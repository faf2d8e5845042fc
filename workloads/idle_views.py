"""Pages' side of idle reclaim: the job page's banner context and its snooze, resume, exempt buttons;
and the restart of a job of several workers whose collective may be hung (its GPUs all idle)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.choices import Role
from accounts.models import User
from accounts.selectors import is_operator, project_role
from workloads import selectors
from workloads.models import Job, QueueSettings
from workloads.services import idle_actions, workers


def idle_context(user: User, job: Job) -> dict[str, Any]:
    """What the job page's idle banner shows: the deadline, snoozes left, reclaimed hours."""
    row = QueueSettings.load()
    suspend_at = job.idle_warned_at + timedelta(seconds=row.idle_warning_s) if job.idle_warned_at else None
    return {
        "suspend_at": suspend_at,
        "snoozes_left": max(0, row.idle_max_snoozes - job.idle_snoozes),
        "max_snoozes": row.idle_max_snoozes,
        "window_min": round((row.idle_interactive_window_s if job.interactive else row.idle_window_s) / 60),
        "reclaimed": selectors.idle_reclaimed_gpu_hours(job=job),
        "can_exempt": is_operator(user) or project_role(user=user, project=job.project) == Role.MANAGER,
    }


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # noqa: S101 - login_required ran
    return request.user


def _do(request: HttpRequest, uid: str, verb: str) -> HttpResponse:
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    try:
        if verb == "restart":
            workers.workers_restart_now(actor=user, job=job, request=request)
            messages.success(request, "Every worker starts again, from the front of the queue.")
        elif verb == "snooze":
            idle_actions.job_idle_snooze(actor=user, job=job, request=request)
            messages.success(request, "Snoozed: the idle window starts again.")
        elif verb == "resume":
            idle_actions.job_idle_resume(actor=user, job=job, request=request)
            messages.success(request, "Resumed: the job is back in the queue.")
        else:
            exempt = request.POST.get("exempt") == "1"
            idle_actions.job_idle_exempt_set(actor=user, job=job, exempt=exempt, request=request)
            messages.success(
                request, "Exempt from idle reclaim." if exempt else "Idle reclaim applies again."
            )
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("workloads:detail", uid=job.uid)


@login_required
@require_POST
def job_idle_snooze(request: HttpRequest, uid: str) -> HttpResponse:
    return _do(request, uid, "snooze")


@login_required
@require_POST
def job_idle_resume(request: HttpRequest, uid: str) -> HttpResponse:
    return _do(request, uid, "resume")


@login_required
@require_POST
def job_idle_exempt(request: HttpRequest, uid: str) -> HttpResponse:
    return _do(request, uid, "exempt")


@login_required
@require_POST
def job_workers_restart(request: HttpRequest, uid: str) -> HttpResponse:
    return _do(request, uid, "restart")
