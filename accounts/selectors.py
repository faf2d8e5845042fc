"""Reads for accounts. Tenancy is enforced here: a project a user does not belong to does not exist."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from accounts.choices import ROLES_THAT_SUBMIT, Role
from accounts.models import ApiToken, AuditLog, Membership, Project, User


def project_list(*, user: User) -> QuerySet[Project]:
    qs = Project.objects.select_related("quota").filter(is_active=True)
    if user.is_staff:
        return qs
    return qs.filter(memberships__user=user).distinct()


def project_get(*, user: User, slug: str) -> Project:
    project = project_list(user=user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    return project


def project_role(*, user: User, project: Project) -> Role | None:
    role = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
    return Role(role) if role else None


def can_submit(*, user: User, project: Project) -> bool:
    """Whether the user may submit and act on jobs in the project: operators always, members by role."""
    return user.is_staff or project_role(user=user, project=project) in ROLES_THAT_SUBMIT


def membership_list(*, project: Project) -> QuerySet[Membership]:
    return Membership.objects.filter(project=project).select_related("user").order_by("user__email")


def token_list(*, user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def audit_list(*, project: Project | None = None) -> QuerySet[AuditLog]:
    qs = AuditLog.objects.select_related("actor", "project")
    return qs.filter(project=project) if project is not None else qs
