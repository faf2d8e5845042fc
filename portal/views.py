"""The home dashboard: my projects and their quotas."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from accounts import selectors
from accounts.models import User


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    projects = selectors.project_list(user=request.user)
    return render(request, "portal/dashboard.html", {"projects": projects})


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True})
