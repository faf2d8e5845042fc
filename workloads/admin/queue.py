"""Operators' queue: the admission queue in order with reasons (hold / release / move to front),
quota grants (approve / refuse), and the queue settings."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.admin import AuditedAdmin
from accounts.models import User
from workloads.choices import JobState
from workloads.models import QueuedJob, QueueSettings, QuotaGrant
from workloads.selectors import queue_summary
from workloads.services import grants
from workloads.services.queue import queue_action


def _actor(request: HttpRequest) -> User:
    if not isinstance(request.user, User):
        raise PermissionDenied
    return request.user


@admin.register(QueuedJob)
class QueuedJobAdmin(AuditedAdmin):
    list_display = (
        "position",
        "__str__",
        "project",
        "owner",
        "size",
        "priority",
        "held",
        "queue_front",
        "reason",
        "estimated_start",
        "submitted_at",
    )
    list_filter = ("project", "priority", "held")
    list_select_related = ("project", "owner")
    actions = ["hold", "release", "move_to_front"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[QueuedJob]:
        qs = super().get_queryset(request).filter(state=JobState.QUEUED)
        return qs.order_by("held", "queue_position", "submitted_at", "id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None

    @admin.display(description="#")
    def position(self, job: QueuedJob) -> Any:
        return job.queue_position or "-"

    @admin.display(description="GPUs")
    def size(self, job: QueuedJob) -> str:
        return f"{job.gpus}" if job.gpus else f"{job.mps_slices} slices"

    @admin.display(description="why pending")
    def reason(self, job: QueuedJob) -> str:
        q = queue_summary(job)
        if q is None:
            return ""
        hints = "; ".join(q["hints"])
        return q["reason"] + (f" ({hints})" if hints else "")

    @admin.display(description="estimated start")
    def estimated_start(self, job: QueuedJob) -> str:
        q = queue_summary(job)
        return (q["estimated_start"] if q else None) or "-"

    def _act(self, request: HttpRequest, queryset: QuerySet[QueuedJob], action: str) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        count = queue_action(actor=_actor(request), job_ids=ids, action=action, request=request)
        self.message_user(request, f"{action}: {count} job(s).", messages.SUCCESS)

    @admin.action(description="Hold (keep the place, never start)")
    def hold(self, request: HttpRequest, queryset: QuerySet[QueuedJob]) -> None:
        self._act(request, queryset, "hold")

    @admin.action(description="Release")
    def release(self, request: HttpRequest, queryset: QuerySet[QueuedJob]) -> None:
        self._act(request, queryset, "release")

    @admin.action(description="Move to the front (of its priority)")
    def move_to_front(self, request: HttpRequest, queryset: QuerySet[QueuedJob]) -> None:
        self._act(request, queryset, "front")


class QuotaGrantForm(forms.ModelForm[QuotaGrant]):
    """An operator's edit names a GPU type the cluster has, as a request must (services.grants)."""

    class Meta:
        model = QuotaGrant
        fields = ["project", "gpus", "gpu_type", "slices", "starts_at", "until", "reason"]

    def clean_gpu_type(self) -> str:
        value = str(self.cleaned_data.get("gpu_type") or "").strip()
        error = grants.gpu_type_error(value)
        if error:
            raise forms.ValidationError(error)
        return value


@admin.register(QuotaGrant)
class QuotaGrantAdmin(AuditedAdmin):
    form = QuotaGrantForm
    list_display = (
        "project",
        "gpus",
        "gpu_type",
        "slices",
        "starts_at",
        "until",
        "status",
        "requested_by",
        "decided_by",
    )
    list_filter = ("status", "project", "gpu_type")
    readonly_fields = ("status", "decided_by", "decided_at", "requested_by")
    actions = ["approve", "refuse"]

    def save_model(self, request: HttpRequest, obj: QuotaGrant, form: Any, change: bool) -> None:
        before = QuotaGrant.objects.filter(pk=obj.pk).values_list("project_id", flat=True).first()
        super().save_model(request, obj, form, change)
        if change:
            grants.grant_edited(grant=obj, project_before=before)

    def _decide(self, request: HttpRequest, queryset: QuerySet[QuotaGrant], approve: bool) -> None:
        actor = _actor(request)
        done = sum(
            grants.grant_decide(actor=actor, grant=g, approve=approve, request=request) for g in queryset
        )
        self.message_user(
            request, f"{'Approved' if approve else 'Refused'} {done} grant(s).", messages.SUCCESS
        )

    @admin.action(description="Approve the selected requests")
    def approve(self, request: HttpRequest, queryset: QuerySet[QuotaGrant]) -> None:
        self._decide(request, queryset, True)

    @admin.action(description="Refuse the selected requests")
    def refuse(self, request: HttpRequest, queryset: QuerySet[QuotaGrant]) -> None:
        self._decide(request, queryset, False)


@admin.register(QueueSettings)
class QueueSettingsAdmin(AuditedAdmin):
    list_display = ("__str__", "half_life_hours", "borrowing_enabled", "preemption_notice_s")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not QueueSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
