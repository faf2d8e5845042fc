"""Portal pages: jobs list (live over a websocket), submit form, job page. Thin: selectors + services."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.models import User
from accounts.selectors import can_submit, project_get, project_list
from workloads import app_settings, selectors
from workloads.accounting import chart_data, usage_history
from workloads.forms import GrantRequestForm, SubmitForm
from workloads.models import Job, QuotaGrant
from workloads.services import grants
from workloads.services import jobs as services


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    return request.user


def _submit_projects(user: User) -> list[Any]:
    return [p for p in project_list(user=user) if can_submit(user=user, project=p)]


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    state = request.GET.get("state") or None
    jobs = selectors.job_list(user=user, state=state, project=request.GET.get("project") or None)[:200]
    context = {"jobs": jobs, "state": state, "projects": project_list(user=user)}
    return render(request, "workloads/job_list.html", context)


def _apply_errors(form: SubmitForm, exc: ValidationError) -> None:
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)


@login_required
def job_submit(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    projects = _submit_projects(user)
    choices = [(p.slug, p.name) for p in projects]
    form = SubmitForm(request.POST or None, projects=choices, simulation=app_settings.simulation())
    if request.method == "POST" and form.is_valid():
        project = next(p for p in projects if p.slug == form.cleaned_data["project"])
        try:
            job = services.job_submit(actor=user, project=project, data=form.spec(), request=request)
        except ValidationError as exc:
            _apply_errors(form, exc)
        except services.QueueFull as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Submitted {job.k8s_name}.")
            return redirect("workloads:detail", uid=job.uid)
    headroom = [(p, selectors.quota_headroom(project=p)) for p in projects]
    status = 400 if request.method == "POST" else 200
    return render(request, "workloads/job_submit.html", {"form": form, "headroom": headroom}, status=status)


@login_required
def job_detail(request: HttpRequest, uid: str) -> HttpResponse:
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    can_act = selectors.can_act_on_job(user=user, job=job)
    context = {"job": job, "events": selectors.job_events(job=job), "can_act": can_act}
    return render(request, "workloads/job_detail.html", context)


def _act(request: HttpRequest, uid: str, verb: str) -> Job:
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    try:
        if verb == "cancel":
            return services.job_cancel(actor=user, job=job, request=request)
        return services.job_rerun(actor=user, job=job, request=request)
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
        return job


@login_required
@require_POST
def job_cancel(request: HttpRequest, uid: str) -> HttpResponse:
    job = _act(request, uid, "cancel")
    return redirect("workloads:detail", uid=job.uid)


@login_required
@require_POST
def job_rerun(request: HttpRequest, uid: str) -> HttpResponse:
    job = _act(request, uid, "rerun")
    return redirect("workloads:detail", uid=job.uid)


@login_required
def project_usage(request: HttpRequest, slug: str) -> HttpResponse:
    """GPU-hours per user per day (last 30 days), the CSV link, and the grant request form."""
    user = _user(request)
    project = project_get(user=user, slug=slug)
    form = GrantRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            grant = grants.grant_request(
                actor=user,
                project=project,
                gpus=data["gpus"],
                slices=data["slices"],
                starts_at=data["starts_at"],
                until=data["until"],
                reason=data["reason"],
                request=request,
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(
                request, f"Requested +{grant.gpus} GPUs / +{grant.slices} slices; an operator decides."
            )
            return redirect("workloads:project_usage", slug=project.slug)
    rows = usage_history(jobs=Job.objects.filter(project=project), group="user", days=30)
    context = {
        "project": project,
        "form": form,
        "data": chart_data(rows, group="user"),
        "can_request": can_submit(user=user, project=project),
        "grants": QuotaGrant.objects.filter(project=project)[:20],
    }
    return render(
        request, "workloads/project_usage.html", context, status=400 if request.method == "POST" else 200
    )
