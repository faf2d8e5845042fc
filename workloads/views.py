"""Portal pages: jobs list (live over a websocket), submit form, job page, rerun with changes, a project's
templates. Thin: selectors + services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.choices import ROLES_THAT_SUBMIT
from accounts.models import Project, User
from accounts.selectors import can_submit, is_operator, project_get, project_list, project_list_with_role
from workloads import app_settings, rightsizing, selectors
from workloads.accounting import (
    chart_data,
    job_used_hours,
    slice_plan,
    totals_chart,
    usage_history,
    usage_totals,
)
from workloads.forms import GrantRequestForm, SubmitForm, TemplateForm, spec_initial
from workloads.idle_views import idle_context
from workloads.models import Job, JobTemplate, QuotaGrant
from workloads.services import grants, templates
from workloads.services import jobs as services


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    return request.user


def _submit_projects(user: User) -> list[Project]:
    """The projects the user may submit to, their role read in the same query."""
    operator = is_operator(user)
    projects = project_list_with_role(user=user)
    return [p for p in projects if operator or getattr(p, "role_of_user", None) in ROLES_THAT_SUBMIT]


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    state = request.GET.get("state") or None
    jobs = selectors.job_list(user=user, state=state, project=request.GET.get("project") or None)[:200]
    context = {"jobs": jobs, "state": state, "projects": project_list(user=user)}
    return render(request, "workloads/job_list.html", context)


def _apply_errors(exc: ValidationError, form: SubmitForm, *others: forms.Form) -> None:
    """Each service error on the field it names (template name on the template form), else on top."""
    for field, errors in exc.message_dict.items():
        target = next((f for f in (*others, form) if field in f.fields), None)
        if target is None:
            label = "" if field in ("non_field_errors", "__all__") else f"{field}: "
            form.add_error(None, [f"{label}{e}" for e in errors])
        else:
            target.add_error(field, errors)


def _spec_form(
    request: HttpRequest, projects: list[Project], initial: dict[str, Any] | None = None
) -> tuple[SubmitForm, list[dict[str, Any]]]:
    catalog = selectors.submit_catalog(projects=projects)
    form = SubmitForm(
        request.POST or None,
        initial=initial,
        projects=[(p.slug, p.name) for p in projects],
        switches=app_settings.site_switches(),
        volumes={slug: c["volumes"] for slug, c in catalog.items()},
    )
    # rows for the page: each project's images and volumes, shown under the project choice
    rows = [
        {"slug": slug, "images": c["images"], "volumes": sorted(c["volumes"].items())}
        for slug, c in catalog.items()
    ]
    return form, rows


def _from_template(request: HttpRequest, user: User) -> JobTemplate | None:
    pk = request.GET.get("template") or ""
    if not pk:
        return None
    if not pk.isdigit():
        raise Http404("No such template.")
    template = selectors.template_get(user=user, pk=int(pk))
    services.require_submitter(actor=user, project=template.project)
    return template


def _submit(request: HttpRequest, user: User, project: Project, form: SubmitForm, template: Any) -> Job:
    if template is not None:  # the form's fields override the template's, all of them
        return templates.template_submit(
            actor=user, template=template, overrides=form.spec(), request=request
        )
    return services.job_submit(actor=user, project=project, data=form.spec(), request=request)


@login_required
def job_submit(request: HttpRequest) -> HttpResponse:
    """The submit form; `?template=<id>` prefills it from a template (its project only)."""
    user = _user(request)
    template = _from_template(request, user)
    projects = [template.project] if template else _submit_projects(user)
    initial = {**spec_initial(template.spec), "project": template.project.slug} if template else None
    form, catalog = _spec_form(request, projects, initial)
    saving = request.POST.get("action") == "save-template"
    meta = TemplateForm(request.POST if saving else None, prefix="template")
    if request.method == "POST" and form.is_valid() and (not saving or meta.is_valid()):
        project = next(p for p in projects if p.slug == form.cleaned_data["project"])
        try:
            if saving:
                data = meta.cleaned_data
                saved = templates.template_create(
                    actor=user, project=project, spec=form.spec(), request=request, **data
                )
                messages.success(request, f"Saved template {saved.name}.")
                return redirect("workloads:templates", slug=project.slug)
            job = _submit(request, user, project, form, template)
        except ValidationError as exc:
            _apply_errors(exc, form, meta)
        except services.QueueFull as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Submitted {job.k8s_name}.")
            return redirect("workloads:detail", uid=job.uid)
    context = {
        "form": form,
        "meta": meta,
        "catalog": catalog,
        "template": template,
        "templates": selectors.template_list(user=user).filter(project__in=projects),
        "headroom": selectors.quota_headroom_list(projects=projects),
    }
    return render(request, "workloads/job_submit.html", context, status=_status(request))


def _status(request: HttpRequest) -> int:
    return 400 if request.method == "POST" else 200


def _detail_context(user: User, job: Job, meta: TemplateForm | None = None) -> dict[str, Any]:
    plan = dict(slice_plan())
    return {
        "job": job,
        "events": selectors.job_events(job=job),
        "can_act": selectors.can_act_on_job(user=user, job=job),
        "can_save": can_submit(user=user, project=job.project),
        "meta": meta or TemplateForm(prefix="template"),
        "hint": rightsizing.suggest(job, per_gpu=rightsizing.per_gpu_for(job, plan)),
        "used_gpu_hours": job_used_hours(job, plan),
        "idle": idle_context(user, job),
        "worker_indices": range(job.workers),
    }


@login_required
def job_detail(request: HttpRequest, uid: str) -> HttpResponse:
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    return render(request, "workloads/job_detail.html", _detail_context(user, job))


@login_required
@require_POST
def job_save_template(request: HttpRequest, uid: str) -> HttpResponse:
    """Save a job's request as a template of its project (from the job page)."""
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    services.require_submitter(actor=user, project=job.project)
    meta = TemplateForm(request.POST, prefix="template")
    if meta.is_valid():
        try:
            saved = templates.template_from_job(actor=user, job=job, request=request, **meta.cleaned_data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                meta.add_error(field if field in meta.fields else None, errors)
        else:
            messages.success(request, f"Saved template {saved.name}.")
            return redirect("workloads:templates", slug=job.project.slug)
    return render(request, "workloads/job_detail.html", _detail_context(user, job, meta), status=400)


@login_required
def job_rerun_edit(request: HttpRequest, uid: str) -> HttpResponse:
    """The submit form prefilled from a job; submitting reruns it (rerun_of kept) with the changes."""
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    services.require_job_actor(actor=user, job=job)
    initial = {**spec_initial(services.job_spec_request(job)), "project": job.project.slug}
    form, catalog = _spec_form(request, [job.project], initial)
    if request.method == "POST" and form.is_valid():
        try:
            new = services.job_rerun(actor=user, job=job, edits=form.spec(), request=request)
        except ValidationError as exc:
            _apply_errors(exc, form)
        except services.QueueFull as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Submitted {new.k8s_name}, a rerun of {job.k8s_name}.")
            return redirect("workloads:detail", uid=new.uid)
    context = {"form": form, "catalog": catalog, "rerun_of": job}
    return render(request, "workloads/job_submit.html", context, status=_status(request))


@login_required
def project_templates(request: HttpRequest, slug: str) -> HttpResponse:
    user = _user(request)
    project = project_get(user=user, slug=slug)
    context = {
        "project": project,
        "templates": selectors.template_list(user=user, project=project.slug).select_related("created_by"),
        "can_edit": can_submit(user=user, project=project),
    }
    return render(request, "workloads/template_list.html", context)


def _editable_template(request: HttpRequest, pk: int) -> tuple[User, JobTemplate]:
    user = _user(request)
    template = selectors.template_get(user=user, pk=pk)
    services.require_submitter(actor=user, project=template.project)
    return user, template


@login_required
def template_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Name, description and spec of a template, the spec through the submit form's fields."""
    user, template = _editable_template(request, pk)
    project = template.project
    form, catalog = _spec_form(request, [project], {**spec_initial(template.spec), "project": project.slug})
    meta_initial = {"name": template.name, "description": template.description}
    meta = TemplateForm(request.POST or None, initial=meta_initial, prefix="template")
    if request.method == "POST" and form.is_valid() and meta.is_valid():
        try:
            templates.template_update(
                actor=user, template=template, spec=form.spec(), request=request, **meta.cleaned_data
            )
        except ValidationError as exc:
            _apply_errors(exc, form, meta)
        else:
            messages.success(request, f"Saved template {template.name}.")
            return redirect("workloads:templates", slug=project.slug)
    context = {"form": form, "meta": meta, "catalog": catalog, "editing": template}
    return render(request, "workloads/job_submit.html", context, status=_status(request))


@login_required
@require_POST
def template_delete(request: HttpRequest, pk: int) -> HttpResponse:
    user, template = _editable_template(request, pk)
    slug, name = template.project.slug, template.name
    templates.template_delete(actor=user, template=template, request=request)
    messages.success(request, f"Deleted template {name}.")
    return redirect("workloads:templates", slug=slug)


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
@require_POST
def job_rerun_rightsized(request: HttpRequest, uid: str) -> HttpResponse:
    """Rerun at the size the right-sizing hint suggests, computed again here (never from the form)."""
    user = _user(request)
    job = selectors.job_get(user=user, uid=uid)
    hint = rightsizing.suggest(job, per_gpu=rightsizing.per_gpu_for(job))
    if hint is None:
        messages.error(request, "This job has no smaller size to suggest.")
        return redirect("workloads:detail", uid=job.uid)
    try:
        new = services.job_rerun(actor=user, job=job, edits=hint.edits, request=request)
    except (ValidationError, PermissionDenied, services.QueueFull) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
        return redirect("workloads:detail", uid=job.uid)
    messages.success(request, f"Submitted {new.k8s_name} at {hint.size}, a rerun of {job.k8s_name}.")
    return redirect("workloads:detail", uid=new.uid)


@login_required
def project_usage(request: HttpRequest, slug: str) -> HttpResponse:
    """GPU-hours per user per day (last 30 days), allocated and used per user and GPU type, the jobs
    that ask for far more than they use, the CSV link, and the grant request form."""
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
    jobs = Job.objects.filter(project=project)
    rows = usage_history(jobs=jobs, group="user", days=30)
    by_type = usage_totals(jobs=jobs, by="gpu_type")
    context = {
        "project": project,
        "by_user": usage_totals(jobs=jobs, by="user"),
        "by_type": by_type,
        "type_chart": totals_chart(by_type, by="gpu_type"),
        "oversized": rightsizing.oversized_jobs(project=project),
        "idle": selectors.project_idle_summary(project=project),
        "busy_pct": app_settings.busy_sm_pct(),
        "min_minutes": app_settings.rightsizing_min_minutes(),
        "mem_pct": app_settings.oversized_mem_pct(),
        "sm_pct": app_settings.oversized_sm_pct(),
        "form": form,
        "data": chart_data(rows, group="user"),
        "can_request": can_submit(user=user, project=project),
        "grants": QuotaGrant.objects.filter(project=project)[:20],
    }
    return render(
        request, "workloads/project_usage.html", context, status=400 if request.method == "POST" else 200
    )
