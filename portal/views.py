"""The landing pages: operators land on the cluster map, users on their dashboard (projects, quotas)."""

from __future__ import annotations

import sys

from django.contrib.auth.decorators import login_required
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from accounts import selectors
from accounts.models import User


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """After sign-in: operators first want to see the GPUs; users their projects."""
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    return redirect("gpu:cluster" if selectors.is_operator(request.user) else "portal:dashboard")


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    projects = selectors.project_list(user=request.user)
    return render(request, "portal/dashboard.html", {"projects": projects})


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
