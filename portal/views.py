"""The landing pages: operators land on the cluster map, users on their dashboard (projects, quotas)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
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


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True})
