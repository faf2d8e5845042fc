"""Reads for accounts. Tenancy is enforced here: a project a user does not belong to does not exist."""

from __future__ import annotations

from typing import Any

from allauth.mfa.models import Authenticator
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import Http404

from accounts.choices import ROLES_THAT_SUBMIT, Role
from accounts.models import ApiToken, Membership, Project, ProjectWebhook, User, WebhookDelivery


def is_operator(user: Any) -> bool:
    """Whether the user holds operator power: active staff whose operator factor, a TOTP that
    predates the staff grant or was confirmed from the account's mailbox, is still set up
    (accounts/operator_factor.py).

    The staff flag alone is not enough: a stolen password of a staff account without a second
    factor must open no more than a plain user's account does, on pages, API and sockets alike.
    Takes any request user (anonymous, a node agent) and answers False for those.
    """
    if not (getattr(user, "is_staff", False) and getattr(user, "is_active", False) and user.pk):
        return False
    factor = getattr(user, "operator_factor_id", None)
    if factor is None:
        return False
    return bool(
        Authenticator.objects.filter(pk=factor, user_id=user.pk, type=Authenticator.Type.TOTP).exists()
    )


def project_list(*, user: User) -> QuerySet[Project]:
    qs = Project.objects.select_related("quota").filter(is_active=True)
    if is_operator(user):
        return qs
    return qs.filter(memberships__user=user).distinct()


def project_list_with_role(*, user: User) -> QuerySet[Project]:
    """project_list with the user's role in each as `role_of_user` (None for an operator who is not a
    member), read in the same query rather than one query per project."""
    role = Membership.objects.filter(project=OuterRef("pk"), user=user).order_by().values("role")[:1]
    return project_list(user=user).annotate(role_of_user=Subquery(role))


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
    return is_operator(user) or project_role(user=user, project=project) in ROLES_THAT_SUBMIT


def membership_list(*, project: Project) -> QuerySet[Membership]:
    return Membership.objects.filter(project=project).select_related("user").order_by("user__email")


def token_list(*, user: User, revoked: bool = True) -> QuerySet[ApiToken]:
    """The user's tokens, newest first; `revoked=False`: only those not revoked (the API's view: a
    DELETE there revokes, and what it revoked is gone, 404; the tokens page keeps the history)."""
    tokens = ApiToken.objects.filter(user=user).order_by("-created_at")
    return tokens if revoked else tokens.filter(revoked_at__isnull=True)


def webhook_get(*, project: Project) -> ProjectWebhook | None:
    """The project's webhook with its delivery counts (`delivered`, `failing`), in one query."""
    return (
        ProjectWebhook.objects.filter(project=project)
        .annotate(
            delivered=Count("deliveries", filter=Q(deliveries__delivered_at__isnull=False)),
            failing=Count(
                "deliveries", filter=Q(deliveries__delivered_at__isnull=True, deliveries__attempts__gt=0)
            ),
        )
        .first()
    )


def webhook_deliveries(*, webhook: ProjectWebhook, limit: int = 10) -> list[WebhookDelivery]:
    """The hook's latest deliveries, newest first (the manager's delivery log on the project page)."""
    return list(WebhookDelivery.objects.filter(webhook=webhook).order_by("-created_at", "-pk")[:limit])
