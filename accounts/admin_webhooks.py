"""Operators' view of project webhooks and their delivery log (read-only: managers set hooks
through the API, and deliveries are the portal's own record)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.models import ProjectWebhook, WebhookDelivery


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ProjectWebhook)
class ProjectWebhookAdmin(ReadOnlyAdmin):
    list_display = ["project", "url", "enabled", "updated_at"]
    list_filter = ["enabled"]
    search_fields = ["project__slug", "url"]
    exclude = ["secret"]  # the signing key never shows in the admin


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "webhook", "event", "attempts", "last_status", "delivered_at", "last_error"]
    list_filter = ["event", ("delivered_at", admin.EmptyFieldListFilter)]
    search_fields = ["webhook__project__slug", "event"]
    date_hierarchy = "created_at"

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
