"""The operators' admin for nodes and GPUs: live panels, and audited actions that reach the cluster.

Actions only change desired state through gpu.services (audited there); the services send the
`workloads.reconcile_node` task by name after commit, which patches the Node (cordon) or the
plugin's ConfigMap (sharing mode, service flag). Mirrored fields are read-only: the cluster owns them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from accounts.admin import AuditedAdmin
from accounts.models import User
from gpu import selectors, services
from gpu.choices import SharingMode
from gpu.models import Gpu, GpuEvent, Node, NodeToken
from plugin.names import SWITCH_LABEL

MIRRORED_NODE = (
    "name",
    "uid",
    "labels_shown",
    "capacity_shown",
    "allocatable_shown",
    "conditions_shown",
    "cordoned",
    "gpu_model",
    "gpu_count",
    "resource_version",
    "last_seen",
    "synced_at",
    "deleted",
    "deleted_at",
)


def _pairs(values: dict[str, object]) -> str:
    """`key: value` lines, sorted, escaped."""
    return format_html_join(mark_safe("<br>"), "{}: {}", sorted(values.items())) or "-"


def _actor(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


class GpuInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Gpu
    extra = 0
    can_delete = False
    fields = (
        "index",
        "uuid",
        "model",
        "memory_mib",
        "sharing_mode",
        "slices",
        "cross_project",
        "isolation",
        "health",
        "health_reason",
        "in_service",
        "last_seen",
    )
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Node)
class NodeAdmin(AuditedAdmin):
    change_form_template = "admin/gpu/node/change_form.html"
    list_display = (
        "name",
        "ready",
        "cordoned",
        "desired_cordoned",
        "gpu_model",
        "gpu_count",
        "switch",
        "last_seen",
        "deleted",
    )
    list_filter = ("cordoned", "deleted", "gpu_model")
    search_fields = ("name",)
    readonly_fields = (*MIRRORED_NODE, "desired_cordoned")
    exclude = ("labels", "capacity", "allocatable", "conditions")  # shown read-only as lines instead
    inlines = (GpuInline,)
    actions = ("cordon", "uncordon", "create_agent_token")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # Nodes come from the cluster

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a mirror: the row goes (is marked deleted) when the cluster's Node goes

    @admin.display(boolean=True, description="Ready")
    def ready(self, obj: Node) -> bool:
        return obj.is_ready

    @admin.display(description="Switch")
    def switch(self, obj: Node) -> str | None:
        """The operators' label of the node's network switch: workers of one job go under one."""
        return (obj.labels or {}).get(SWITCH_LABEL) or None

    # The mirrored JSON fields, shown as a reader would want them rather than as raw JSON.
    @admin.display(description="Labels")
    def labels_shown(self, obj: Node) -> str:
        return _pairs(obj.labels)

    @admin.display(description="Capacity")
    def capacity_shown(self, obj: Node) -> str:
        return _pairs(obj.capacity)

    @admin.display(description="Allocatable")
    def allocatable_shown(self, obj: Node) -> str:
        return _pairs(obj.allocatable)

    @admin.display(description="Conditions")
    def conditions_shown(self, obj: Node) -> str:
        rows = [
            (c.get("type", ""), c.get("status", ""), c.get("reason") or "", c.get("message") or "")
            for c in obj.conditions
        ]
        return format_html_join(mark_safe("<br>"), "{}: {} {} {}", rows) or "-"

    @admin.action(description="Cordon selected nodes (no new pods)")
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset.filter(deleted=False):
            services.node_set_cordon(node=node, cordoned=True, actor=_actor(request), request=request)
        self.message_user(request, "Cordon requested; the node changes in the cluster in a moment.")

    @admin.action(description="Uncordon selected nodes")
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset.filter(deleted=False):
            services.node_set_cordon(node=node, cordoned=False, actor=_actor(request), request=request)
        self.message_user(request, "Uncordon requested.")

    @admin.action(description="Create an agent token (shown once)")
    def create_agent_token(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset.filter(deleted=False):
            _, secret = services.node_token_create(node=node, actor=_actor(request), request=request)
            self.message_user(
                request,
                f"Agent token for {node.name} (copy it now, it is not shown again): {secret}",
                messages.WARNING,
            )


class GpuActionForm(ActionForm):
    slices = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=services.MAX_SLICES,
        initial=4,
        help_text="MPS slices for 'Set shared'.",
    )


@admin.register(Gpu)
class GpuAdmin(AuditedAdmin):
    change_form_template = "admin/gpu/gpu/change_form.html"
    action_form = GpuActionForm
    list_display = (
        *("__str__", "uuid", "model", "sharing_mode", "slices", "isolation", "health", "in_service"),
        "last_seen",
    )
    list_filter = ("sharing_mode", "health", "in_service", "node")
    search_fields = ("uuid", "node__name")
    readonly_fields = (
        "node",
        "index",
        "uuid",
        "model",
        "memory_mib",
        "sharing_mode",
        "slices",
        "cross_project",
        "isolation",
        "health",
        "health_reason",
        "last_bad_at",
        "in_service",
        "ecc_sbe",
        "ecc_dbe",
        "last_seen",
        "health_history",
    )
    actions = (
        "set_exclusive",
        "set_shared",
        "allow_cross_project",
        "one_project_at_a_time",
        "take_out_of_service",
        "return_to_service",
        "force_healthy",
        "force_unhealthy",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # GPUs come from the node agents; operators change them through the actions

    @admin.action(description="Set exclusive (whole GPU)")
    def set_exclusive(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        for gpu in queryset.select_related("node"):
            services.gpu_set_sharing(
                gpu=gpu, mode=SharingMode.EXCLUSIVE, slices=1, actor=_actor(request), request=request
            )
        self.message_user(request, "Sharing mode change sent to the device plugin.")

    @admin.action(description="Set shared (MPS) with the slice count below")
    def set_shared(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        slices = int(request.POST.get("slices") or 4)
        if not 1 <= slices <= services.MAX_SLICES:
            self.message_user(request, f"Slices must be 1..{services.MAX_SLICES}.", messages.ERROR)
            return
        for gpu in queryset.select_related("node"):
            services.gpu_set_sharing(
                gpu=gpu, mode=SharingMode.SHARED, slices=slices, actor=_actor(request), request=request
            )
        self.message_user(request, f"Shared with {slices} slices; sent to the device plugin.")

    @admin.display(description="Tenant isolation")
    def isolation(self, gpu: Gpu) -> str:
        return gpu.isolation

    @admin.action(description="Allow cross-project sharing (weaker isolation)")
    def allow_cross_project(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._cross_project(request, queryset, allowed=True)

    @admin.action(description="One project at a time (default)")
    def one_project_at_a_time(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._cross_project(request, queryset, allowed=False)

    def _cross_project(self, request: HttpRequest, queryset: QuerySet[Gpu], *, allowed: bool) -> None:
        for gpu in queryset.select_related("node"):
            services.gpu_set_cross_project(gpu=gpu, allowed=allowed, actor=_actor(request), request=request)
        self.message_user(
            request,
            "Cross-project sharing allowed: these GPUs' tenants share /dev/shm and the MPS daemon."
            if allowed
            else "One project at a time on these GPUs; sent to the device plugin.",
            messages.WARNING if allowed else messages.SUCCESS,
        )

    @admin.action(description="Take out of service")
    def take_out_of_service(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        for gpu in queryset.select_related("node"):
            services.gpu_set_in_service(gpu=gpu, in_service=False, actor=_actor(request), request=request)
        self.message_user(request, "Taken out of service.")

    @admin.action(description="Return to service")
    def return_to_service(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        for gpu in queryset.select_related("node"):
            services.gpu_set_in_service(gpu=gpu, in_service=True, actor=_actor(request), request=request)
        self.message_user(request, "Returned to service.")

    @admin.action(description="Force healthy now (skip the clean interval)")
    def force_healthy(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        for gpu in queryset.select_related("node"):
            services.gpu_force_health(gpu=gpu, healthy=True, actor=_actor(request), request=request)
        self.message_user(request, "Marked healthy; offered to the device plugin again.")

    @admin.action(description="Force unhealthy (requeue its jobs; returns after the clean interval)")
    def force_unhealthy(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        for gpu in queryset.select_related("node"):
            services.gpu_force_health(gpu=gpu, healthy=False, actor=_actor(request), request=request)
        self.message_user(request, "Marked unhealthy; its jobs are requeued with a notice.")

    @admin.display(description="History (XIDs, ECC, health, service)")
    def health_history(self, obj: Gpu) -> str:
        rows = [
            (f"{e.ts:%Y-%m-%d %H:%M:%S}", e.get_kind_display(), e.message or (e.value if e.value else ""))
            for e in selectors.gpu_events(gpu=obj, limit=30)
        ]
        return format_html_join(mark_safe("<br>"), "{} {}: {}", rows) or "-"


@admin.register(GpuEvent)
class GpuEventAdmin(AuditedAdmin):
    list_display = ("ts", "gpu", "kind", "xid", "value", "message")
    list_filter = ("kind", ("ts", admin.DateFieldListFilter))
    search_fields = ("gpu__uuid", "gpu__node__name", "message")
    date_hierarchy = "ts"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(NodeToken)
class NodeTokenAdmin(AuditedAdmin):
    list_display = ("node", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("node__name", "prefix", "name")
    readonly_fields = (
        "node", "name", "prefix", "digest", "created_at", "expires_at", "last_used_at", "revoked_at",
    )  # fmt: skip
    actions = ("rotate", "revoke")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created by the node action (or `manage.py node_token`), shown once

    @admin.action(description="Rotate selected tokens (new ones shown once; the old ones end in 24 h)")
    def rotate(self, request: HttpRequest, queryset: QuerySet[NodeToken]) -> None:
        for token in queryset.select_related("node").filter(revoked_at__isnull=True):
            _, secret = services.node_token_rotate(token=token, actor=_actor(request), request=request)
            self.message_user(
                request,
                f"New agent token for {token.node.name} (copy it now, it is not shown again): {secret}",
                messages.WARNING,
            )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[NodeToken]) -> None:
        for token in queryset:
            services.node_token_revoke(token=token, actor=_actor(request), request=request)
