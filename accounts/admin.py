"""The operator's admin for accounts: every model, audited changes, a read-only audit log with CSV."""

from __future__ import annotations

from typing import Any

# allauth's admins are registered first, so that they can be replaced below
import allauth.account.admin
import allauth.mfa.admin
import allauth.socialaccount.admin  # noqa: F401
from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken
from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse

from accounts import services
from accounts.audit import audit_record, snapshot
from accounts.exports import csv_download
from accounts.models import (
    ApiToken,
    AuditLog,
    GpuTypeLimit,
    Membership,
    Project,
    ProjectWebhook,
    Quota,
    User,
    UserCap,
)


def _actor(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def _project_of(obj: Any) -> Project | None:
    """The project a row belongs to, for the audit log's project filter (a quota's limits: its project)."""
    if isinstance(obj, Project):
        return obj
    owner = getattr(obj, "project", None) or getattr(getattr(obj, "quota", None), "project", None)
    return owner if isinstance(owner, Project) else None


class AuditedAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Every admin save and delete lands in the audit log with before/after, inline rows included."""

    # Secrets never enter the log, whatever the model calls them.
    audit_exclude: tuple[str, ...] = ("password", "digest", "secret", "token", "token_secret")

    def _stored(self, obj: Any) -> dict[str, Any] | None:
        # From the database: a bound form has already copied the submitted values onto `obj`.
        return snapshot(type(obj)._default_manager.filter(pk=obj.pk).first(), exclude=self.audit_exclude)

    def _audit(self, request: HttpRequest, action: str, obj: Any, **changes: Any) -> None:
        audit_record(
            actor=_actor(request),
            action=action,
            obj=obj,
            project=_project_of(obj),
            request=request,
            **changes,
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        before = self._stored(obj) if change else None
        super().save_model(request, obj, form, change)
        action = f"admin.{'change' if change else 'add'}"
        self._audit(request, action, obj, before=before, after=snapshot(obj, exclude=self.audit_exclude))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._audit(request, "admin.delete", obj, before=self._stored(obj))
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """Inline rows are saved and deleted by the formset, never through save_model or delete_model.

        Deletions are recorded before the formset deletes (afterwards a row has no pk left); the admin
        view's transaction holds the record and the delete together.
        """
        doomed = [f.instance for f in formset.deleted_forms if f.instance.pk is not None]
        for obj in doomed:
            self._audit(request, "admin.inline.delete", obj, before=self._stored(obj))
        befores = {
            f.instance.pk: self._stored(f.instance)
            for f in formset.initial_forms
            if f.has_changed() and f.instance not in doomed
        }
        super().save_formset(request, form, formset, change)
        for obj in formset.new_objects:
            self._audit(request, "admin.inline.add", obj, after=snapshot(obj, exclude=self.audit_exclude))
        for obj, _fields in formset.changed_objects:
            after = snapshot(obj, exclude=self.audit_exclude)
            self._audit(request, "admin.inline.change", obj, before=befores.get(obj.pk), after=after)


class LabelledTabularInline(admin.TabularInline):  # type: ignore[type-arg]
    """A tabular inline whose inputs have names: its labels are column headers, which assistive technology
    does not tie to the inputs below them (axe-core: label, select-name). Each input is named by its
    column and row instead."""

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        return _labelled(super().get_formset(request, obj, **kwargs))


def _labelled(formset: Any) -> Any:
    def add_fields(self: Any, form: Any, index: int | None) -> None:
        formset.add_fields(self, form, index)
        row = "new row" if index is None else f"row {index + 1}"
        for name, field in form.fields.items():
            field.widget.attrs.setdefault("aria-label", f"{field.label or name}, {row}")

    return type(formset.__name__, (formset,), {"add_fields": add_fields})


@admin.register(User)
class PortalUserAdmin(AuditedAdmin, UserAdmin[User]):
    list_display = ("email", "username", "is_staff", "is_active", "last_login", "date_joined")
    list_filter = ("is_staff", "is_active", "memberships__project")
    search_fields = ("email", "username", "first_name", "last_name")
    ordering = ("email",)
    fieldsets = (*UserAdmin.fieldsets, ("Portal", {"fields": ("notify_by_email",)}))  # type: ignore[misc]
    add_fieldsets = ((None, {"fields": ("username", "email", "password1", "password2")}),)
    # Plain multi-selects and read-only timestamps: the two-pane filter widget and the split date-time
    # inputs render controls without names for assistive technology (axe-core: aria-prohibited-attr, label).
    filter_horizontal = ()
    readonly_fields = ("last_login", "date_joined")

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        # Django's own password view saves through its form, not save_model: audit it here.
        response = super().user_change_password(request, id, form_url)
        if request.method == "POST" and response.status_code == 302:
            user = self.get_object(request, unquote(id))
            after = {"by": "admin", "usable": user.has_usable_password() if user else None}
            self._audit(request, "password.change", user, after=after)
        return response


class QuotaInline(admin.StackedInline):  # type: ignore[type-arg]
    model = Quota
    can_delete = False


class MembershipInline(LabelledTabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


class UserCapInline(LabelledTabularInline):
    model = UserCap
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(AuditedAdmin):
    list_display = ("slug", "name", "namespace", "quota_gpus", "member_count", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("slug", "name")
    inlines = (QuotaInline, MembershipInline, UserCapInline)

    def get_inlines(
        self, request: HttpRequest, obj: Project | None
    ) -> list[type[InlineModelAdmin[Any, Any]]]:
        # A new project gets its quota from project_create (the same service as everywhere else); the
        # quota form appears once the project exists, so the two can never both create one.
        return list(self.inlines) if obj is not None else [MembershipInline, UserCapInline]

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        actor = request.user if isinstance(request.user, User) else None
        if actor is None:
            raise PermissionDenied
        services.project_add(actor=actor, project=obj, request=request)

    @admin.display(description="GPUs")
    def quota_gpus(self, obj: Project) -> int:
        return obj.quota.gpus if hasattr(obj, "quota") else 0

    @admin.display(description="Members")
    def member_count(self, obj: Project) -> int:
        return obj.memberships.count()


class GpuTypeLimitInline(LabelledTabularInline):
    model = GpuTypeLimit
    extra = 0


@admin.register(Quota)
class QuotaAdmin(AuditedAdmin):
    list_display = (
        "project",
        "gpus",
        "mps_slices",
        "cpu_millicores",
        "memory_mib",
        "max_concurrent_jobs",
        "max_runtime_minutes",
    )
    search_fields = ("project__slug",)
    inlines = (GpuTypeLimitInline,)


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ("project", "user", "role", "created_at")
    list_filter = ("role", "project")
    search_fields = ("project__slug", "user__email")
    autocomplete_fields = ("user",)


@admin.register(UserCap)
class UserCapAdmin(AuditedAdmin):
    list_display = ("project", "user", "gpus", "mps_slices", "max_concurrent_jobs")
    list_filter = ("project",)
    search_fields = ("project__slug", "user__email")


@admin.register(ApiToken)
class ApiTokenAdmin(AuditedAdmin):
    list_display = (
        "prefix",
        "name",
        "user",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__email")
    readonly_fields = ("user", "prefix", "digest", "scopes", "created_at", "last_used_at", "last_used_ip")
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are created by their owners, who see the secret once

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        assert isinstance(request.user, User)  # noqa: S101 - the admin requires a staff user
        for token in queryset:  # already revoked ones too: the service also revokes their children
            services.token_revoke(actor=request.user, token=token, request=request)


admin.site.unregister(Authenticator)


@admin.register(Authenticator)
class AuthenticatorAdmin(AuditedAdmin):
    """allauth's admin, audited: an operator removing a lost second factor is an MFA removal too.

    Read-only and without `data`: that is the TOTP secret and the recovery codes, with which anyone
    reading them could pass the user's second factor."""

    list_display = ("user", "type", "created_at", "last_used_at")
    list_filter = ("type", "created_at", "last_used_at")
    fields = readonly_fields = ("user", "type", "created_at", "last_used_at")
    audit_exclude = ("data",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # factors are set up by their users, in their own session


def _audit_registered(model: type[Model], exclude: tuple[str, ...] = ()) -> None:
    """Put the audit in front of an admin another package registered; its own behaviour is unchanged."""
    original = type(admin.site._registry[model])
    admin.site.unregister(model)
    fields = {"audit_exclude": AuditedAdmin.audit_exclude + exclude, "__module__": __name__}
    admin.site.register(model, type(f"Audited{original.__name__}", (AuditedAdmin, original), fields))


# An address decides where password resets go (its *Mark verified* action is recorded by the
# email_confirmed receiver in accounts/signals.py); a social account signs its user in.
for _model, _exclude in (
    (EmailAddress, ()),
    (Group, ()),
    (SocialApp, ("key",)),
    (SocialAccount, ("extra_data",)),
    (SocialToken, ()),
):
    _audit_registered(_model, _exclude)


AUDIT_COLUMNS = (
    "created_at",
    "actor_repr",
    "action",
    "object_type",
    "object_id",
    "object_repr",
    "project",
    "ip",
    "before",
    "after",
)


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("created_at", "actor_repr", "action", "object_type", "object_repr", "project", "ip")
    list_filter = ("action", "object_type", "project", ("created_at", admin.DateFieldListFilter))
    search_fields = ("actor_repr", "action", "object_repr", "object_id", "ip")
    date_hierarchy = "created_at"
    actions = ("export_csv",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.action(description="Export selected rows as CSV")
    def export_csv(self, request: HttpRequest, queryset: QuerySet[AuditLog]) -> HttpResponse:
        rows = queryset.select_related("project").order_by("created_at")
        values = ([getattr(row, name) for name in AUDIT_COLUMNS] for row in rows)
        return csv_download(AUDIT_COLUMNS, values, "audit-log.csv")


from accounts import admin_webhooks as admin_webhooks  # noqa: E402 - registers the webhook admins

_audit_registered(ProjectWebhook)  # its delete is an operator's write like any other
