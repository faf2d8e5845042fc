"""Operators' view of jobs: filters, cancel as an action, GPU-hours CSV; allow-lists, templates,
orphan reports and the outbox (volumes: `workloads.admin.volumes`)."""

from __future__ import annotations

from typing import Any

import msgspec
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html

from accounts.admin import AuditedAdmin
from accounts.models import User
from workloads.accounting import csv_response, gpu_hours_row, slice_plan
from workloads.models import (
    ImageRule,
    Job,
    JobEvent,
    JobTemplate,
    OrphanReport,
    ReconcileOutbox,
)
from workloads.services import jobs as job_services
from workloads.services import templates as template_services


class JobEventInline(admin.TabularInline):  # type: ignore[type-arg]
    model = JobEvent
    extra = 0
    can_delete = False
    fields = ("at", "kind", "from_state", "to_state", "reason", "message", "object_ref", "count")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


_SPEC_STORAGE = frozenset({*Job.spec_column_names(), "spec_rest"})


@admin.register(Job)
class JobAdmin(AuditedAdmin):
    list_display = (
        "k8s_name",
        "name",
        "project",
        "owner",
        "state",
        "gpus",
        "mps_slices",
        "node",
        "submitted_at",
    )
    list_filter = ("state", "project", "priority", "preemptible")
    search_fields = ("uid", "name", "owner__email", "image", "node")
    date_hierarchy = "submitted_at"
    list_select_related = ("project", "owner")
    inlines = [JobEventInline]
    actions = ["cancel_jobs", "export_gpu_hours"]
    # The row, then the job's spec as one object: every field of workloads.spec.JobSpec, whether it
    # has a column of its own or is kept in `spec_rest`.
    readonly_fields = ["spec", *(f.name for f in Job._meta.fields)]
    fieldsets = [
        (None, {"fields": [f.name for f in Job._meta.fields if f.name not in _SPEC_STORAGE]}),
        ("Spec", {"fields": ["spec"]}),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs are submitted through the portal or the API, never typed in here

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Spec")
    def spec(self, job: Job) -> str:
        text = msgspec.json.format(msgspec.json.encode(job.job_spec()), indent=2).decode()
        return format_html("<pre>{}</pre>", text)

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        assert isinstance(request.user, User)  # noqa: S101 - admin requires a staff user
        done = 0
        for job in queryset.select_related("project"):
            try:
                job_services.job_cancel(actor=request.user, job=job, request=request)
                done += 1
            except (ValidationError, PermissionDenied) as exc:
                self.message_user(
                    request, f"{job}: {' '.join(getattr(exc, 'messages', [str(exc)]))}", messages.WARNING
                )
        self.message_user(request, f"Cancelled {done} job(s).")

    @admin.action(description="Export GPU-hours of the selected jobs (CSV)")
    def export_gpu_hours(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse:
        now, plan = timezone.now(), slice_plan()
        rows = [gpu_hours_row(job, now, plan=plan) for job in queryset.select_related("project", "owner")]
        return csv_response(rows, "gpu-hours.csv")


class JobTemplateForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = JobTemplate
        fields = ("project", "name", "description", "spec")

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        if data.get("project") is not None and "spec" in data:
            try:
                data["spec"] = template_services.template_spec(project=data["project"], spec=data["spec"])
            except ValidationError as exc:
                fields = getattr(exc, "error_dict", None) and exc.message_dict
                self.add_error(
                    "spec", [f"{k}: {m}" for k, v in fields.items() for m in v] if fields else exc.messages
                )
        return data


@admin.register(ImageRule)
class ImageRuleAdmin(AuditedAdmin):
    list_display = ("project", "registry", "repository", "note")
    list_filter = ("project",)


@admin.register(JobTemplate)
class JobTemplateAdmin(AuditedAdmin):
    """Templates are added here like anywhere else (spec parsed with the project's limits); a saved
    template's spec is shown, not edited: change it by saving a new template."""

    form = JobTemplateForm
    list_display = ("project", "name", "created_by", "created_at")
    list_filter = ("project",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("created_by", "spec") if obj is not None else ("created_by",)

    def save_model(self, request: HttpRequest, obj: JobTemplate, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        if not isinstance(request.user, User):
            raise PermissionDenied
        template_services.template_add(actor=request.user, template=obj, request=request)


@admin.register(OrphanReport)
class OrphanReportAdmin(AuditedAdmin):
    list_display = ("namespace", "name", "job_uid", "first_seen", "last_seen", "resolved_at")
    readonly_fields = ("namespace", "name", "job_uid", "first_seen", "last_seen")


@admin.register(ReconcileOutbox)
class ReconcileOutboxAdmin(AuditedAdmin):
    list_display = ("job", "requested_at", "published_at", "attempts")
    readonly_fields = ("job", "requested_at", "published_at", "attempts")
