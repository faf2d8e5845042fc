"""Operators' admin of project volumes: an existing claim, or a new one the portal creates.

A save is audited (AuditedAdmin) and re-applies the project's namespace after commit, which is
where a new claim is created: nothing reaches the cluster from the request, so a refused form
leaves nothing behind. A delete removes only the row; the claim and its data stay.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.admin import AuditedAdmin
from workloads.models import ProjectVolume
from workloads.services.publisher import namespace_refresh

KEPT = (
    "Removing a volume only stops offering it to jobs: its claim {claim} stays in namespace {ns} with "
    "its data. Delete the claim in the cluster (kubectl delete pvc) if you mean to lose it."
)
CLAIM_HELP = (
    "Existing claim: its name, storage class and size empty. New claim: a name, a storage class, a size "
    "and an access mode; the portal creates it in the project's namespace. Kind, class and access mode "
    "are fixed once saved, and a size can only grow. Deleting the volume keeps the claim and its data."
)
STATUS = ("phase", "status_message", "synced_at")


class ProjectVolumeForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = ProjectVolume
        fields = ("project", "name", "read_only", "claim_name", "storage_class", "size_gib", "access_mode")

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        stored = self.instance
        project = data.get("project") or (stored.project if stored.project_id else None)
        claim = data.get("claim_name", stored.claim_name)
        if project is not None and claim and data.get("storage_class", stored.storage_class):
            self._clean_clash(project.pk, claim)
        size = data.get("size_gib")
        if stored.pk and stored.size_gib and size is not None and size < stored.size_gib:
            self.add_error("size_gib", f"A claim can grow, never shrink: it is {stored.size_gib} GiB.")
        return data

    def _clean_clash(self, project_id: int, claim: str) -> None:
        """A claim the portal creates is named by no other volume of the project (another volume may
        refer to a created claim as an existing one: a read-only view of it, say)."""
        others = ProjectVolume.objects.filter(project_id=project_id, claim_name=claim)
        other = others.exclude(pk=self.instance.pk).first()
        if other is not None:
            self.add_error(
                "claim_name",
                f"Volume {other.name} of this project already names the claim {claim}: choose another "
                "name, or refer to that claim as an existing one (storage class empty).",
            )


@admin.register(ProjectVolume)
class ProjectVolumeAdmin(AuditedAdmin):
    form = ProjectVolumeForm
    list_display = ("project", "name", "claim_name", "kind", "size_gib", "read_only", "phase")
    list_filter = ("project", "phase")
    list_select_related = ("project",)
    fieldsets = (
        (None, {"fields": ("project", "name", "read_only")}),
        (
            "Claim",
            {"description": CLAIM_HELP, "fields": ("claim_name", "storage_class", "size_gib", "access_mode")},
        ),
        ("In the cluster", {"fields": STATUS}),
    )

    actions = ["check_claims"]

    @admin.action(description="Check the selected volumes' claims in the cluster now")
    def check_claims(self, request: HttpRequest, queryset: QuerySet[ProjectVolume]) -> None:
        """The phase is what the last namespace reconcile saw; this asks for one per project now
        (it also makes a claim whose first attempt failed)."""
        projects = sorted(set(queryset.values_list("project_id", flat=True)))
        for project_id in projects:
            namespace_refresh(project_id)
        self.message_user(request, f"Asked the cluster about {len(projects)} project(s); reload in a moment.")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return STATUS
        fixed = ("project", "storage_class", "access_mode")
        return (*fixed, "claim_name" if obj.creates_claim else "size_gib", *STATUS)

    @admin.display(description="kind")
    def kind(self, obj: ProjectVolume) -> str:
        return f"new ({obj.storage_class})" if obj.creates_claim else "existing"

    def save_model(self, request: HttpRequest, obj: ProjectVolume, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        namespace_refresh(obj.project_id)  # after commit: the namespace reconcile makes or grows the claim

    def delete_model(self, request: HttpRequest, obj: ProjectVolume) -> None:
        claim, namespace = obj.claim_name, obj.project.namespace
        super().delete_model(request, obj)
        self.message_user(request, KEPT.format(claim=claim, ns=namespace), messages.WARNING)
