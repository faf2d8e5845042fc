"""The landing pages: operators land on the cluster map, users on their home (jobs, quotas, usage)."""

from __future__ import annotations

import sys

from django.contrib.auth.decorators import login_required
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from accounts import selectors
from accounts.models import User
from workloads import accounting
from workloads import selectors as job_selectors
from workloads.models import Job


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """After sign-in: operators first want to see the GPUs; users their projects."""
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    return redirect("gpu:cluster" if selectors.is_operator(request.user) else "portal:dashboard")


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """A researcher's home: their running and queued jobs (live), each project's quota in use, their
    GPU-hours this week against last, and their projects' templates to start from."""
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - login_required
    projects = list(selectors.project_list(user=user).select_related("quota"))
    this_week, last_week = accounting.week_over_week(jobs=Job.objects.filter(owner=user))
    context = {
        "projects": projects,
        "jobs": job_selectors.my_active_jobs(user=user),
        "idle": job_selectors.my_idle_notices(user=user),
        "quotas": job_selectors.quota_use_list(projects=projects),
        "this_week": this_week,
        "last_week": last_week,
        "templates": list(job_selectors.template_list(user=user).order_by("project__slug", "name")[:20]),
    }
    return render(request, "portal/dashboard.html", context)


DATABASE_DOWN = (
    "The portal's database cannot be reached right now. Running jobs go on in the cluster and "
    "nothing you sent was half-saved; try again in a minute."
)


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 handler: a database outage is a 503 with a plain message (JSON under /api/), never a
    stack trace; anything else is the plain 500 page."""
    failure = sys.exc_info()[1]
    down = isinstance(failure, (OperationalError, InterfaceError))
    status, message = (503, DATABASE_DOWN) if down else (500, "Something went wrong on our side.")
    if request.path.startswith("/api/"):
        code = "database_unavailable" if down else "server_error"
        body = {"error": {"status": status, "code": code, "message": message, "fields": {}}}
        response: HttpResponse = JsonResponse(body, status=status)
    else:  # no template: rendering one could need the database that just failed
        html = f"<!doctype html><title>{status}</title><h1>Service unavailable</h1><p>{message}</p>"
        response = HttpResponse(
            html if down else f"<!doctype html><title>500</title><p>{message}</p>", status=status
        )
    if down:
        response["Retry-After"] = "60"
    return response
