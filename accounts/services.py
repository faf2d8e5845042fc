"""Writes for accounts: projects, memberships, quotas, tokens. Keyword-only, typed, audited."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts import tokens
from accounts.audit import audit_record, snapshot
from accounts.choices import ROLES_THAT_MANAGE, NotifyEvent, Role, TokenScope
from accounts.models import ApiToken, Membership, Project, Quota, User
from accounts.selectors import is_operator

TOKEN_PREFIX = "gpt_"  # noqa: S105 - a public marker, not a secret
MAX_TOKEN_LIFETIME = timedelta(days=365)


def project_create(
    *, actor: User, slug: str, name: str, description: str = "", request: HttpRequest | None = None
) -> Project:
    """Operators create projects; the creator is not made a member (operators see all anyway)."""
    project = Project(slug=slug, name=name, description=description)
    return project_add(actor=actor, project=project, request=request)


def project_add(*, actor: User, project: Project, request: HttpRequest | None = None) -> Project:
    """Save a new project with its default quota (every project has one: pages, the API and the
    queue read it) and audit it. The admin hands in the project its form built."""
    if not is_operator(actor):
        raise PermissionDenied("Only operators create projects.")
    project.full_clean()
    with transaction.atomic():
        project.save()
        Quota.objects.create(project=project)
        audit_record(
            actor=actor,
            action="project.create",
            obj=project,
            project=project,
            after=snapshot(project),
            request=request,
        )
    return project


def require_manager(*, actor: User, project: Project, what: str = "manage its members") -> None:
    """Operators and the project's managers pass; anyone else gets a 403 saying who may."""
    if is_operator(actor):
        return
    role = Membership.objects.filter(project=project, user=actor).values_list("role", flat=True).first()
    if role not in ROLES_THAT_MANAGE:
        raise PermissionDenied(f"Only the project's managers {what}.")


def membership_add(
    *, actor: User, project: Project, user: User, role: Role, request: HttpRequest | None = None
) -> Membership:
    require_manager(actor=actor, project=project)
    if Membership.objects.filter(project=project, user=user).exists():
        raise ValidationError({"user": [f"{user} is already a member of {project}."]})
    membership = Membership(project=project, user=user, role=role)
    membership.full_clean()
    membership.save()
    audit_record(
        actor=actor,
        action="membership.add",
        obj=membership,
        project=project,
        after=snapshot(membership),
        request=request,
    )
    return membership


def _guard_last_manager(membership: Membership) -> None:
    others = Membership.objects.filter(project=membership.project, role=Role.MANAGER).exclude(
        pk=membership.pk
    )
    if membership.role == Role.MANAGER and not others.exists():
        raise ValidationError({"role": ["A project keeps at least one manager."]})


def membership_update(
    *, actor: User, membership: Membership, role: Role, request: HttpRequest | None = None
) -> Membership:
    require_manager(actor=actor, project=membership.project)
    if role != Role.MANAGER:
        _guard_last_manager(membership)
    before = snapshot(membership)
    membership.role = role
    membership.full_clean()
    membership.save(update_fields=["role"])
    audit_record(
        actor=actor,
        action="membership.update",
        obj=membership,
        project=membership.project,
        before=before,
        after=snapshot(membership),
        request=request,
    )
    return membership


def membership_remove(*, actor: User, membership: Membership, request: HttpRequest | None = None) -> None:
    require_manager(actor=actor, project=membership.project)
    _guard_last_manager(membership)
    audit_record(
        actor=actor,
        action="membership.remove",
        obj=membership,
        project=membership.project,
        before=snapshot(membership),
        request=request,
    )
    membership.delete()


QUOTA_FIELDS = (
    "gpus",
    "mps_slices",
    "cpu_millicores",
    "memory_mib",
    "max_concurrent_jobs",
    "max_runtime_minutes",
)


def quota_update(
    *, actor: User, quota: Quota, changes: dict[str, Any], request: HttpRequest | None = None
) -> Quota:
    """Only operators change quotas: a manager can never raise their own project's limits."""
    if not is_operator(actor):
        raise PermissionDenied("Only operators change quotas.")
    unknown = set(changes) - set(QUOTA_FIELDS)
    if unknown:
        raise ValidationError({name: ["Not a quota field."] for name in sorted(unknown)})
    before = snapshot(quota)
    for name, value in changes.items():
        setattr(quota, name, value)
    quota.full_clean()
    quota.save(update_fields=list(changes))
    audit_record(
        actor=actor,
        action="quota.update",
        obj=quota,
        project=quota.project,
        before=before,
        after=snapshot(quota),
        request=request,
    )
    return quota


def token_digest(secret: str) -> str:
    """What an API token stores in place of its secret."""
    return tokens.digest(secret)


def _token_errors(
    *, name: str, scopes: list[str], expires_at: datetime | None, parent: ApiToken | None, now: datetime
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    ceiling = parent.expires_at if parent is not None else None
    valid = set(TokenScope.values)
    if not scopes or not set(scopes) <= valid:
        errors["scopes"] = [f"Choose one or more of {', '.join(sorted(valid))}."]
    if expires_at is not None and not (now < expires_at <= now + MAX_TOKEN_LIFETIME):
        errors["expires_at"] = ["Choose a time in the future, at most 365 days away."]
    elif expires_at is not None and ceiling is not None and expires_at > ceiling:
        errors["expires_at"] = [
            f"A token cannot outlive the token that creates it: choose a time up to {ceiling.isoformat()}."
        ]
    if not name.strip():
        errors["name"] = ["Give the token a name, e.g. the machine or tool that uses it."]
    return errors


def _token_expiry(*, expires_at: datetime | None, parent: ApiToken | None, now: datetime) -> datetime:
    expiry = expires_at or now + timedelta(days=90)
    if parent is not None and parent.expires_at is not None:
        return min(expiry, parent.expires_at)
    return expiry


def token_create(
    *,
    user: User,
    name: str,
    scopes: list[str],
    expires_at: datetime | None,
    parent: ApiToken | None = None,
    request: HttpRequest | None = None,
) -> tuple[ApiToken, str]:
    """Returns the token and its secret; the secret is never stored or shown again.

    `parent` is the token that authenticated the request, if any: the new token expires no later.
    """
    if user.is_staff and not is_operator(user):
        # A token skips the second factor at every use, so staff get none until they have one.
        raise PermissionDenied(
            "Set up two-factor authentication (MFA) first, at /accounts/2fa/, and confirm it from the "
            "link mailed to you (/me/operator/): staff accounts get API tokens only with a confirmed MFA."
        )
    now = timezone.now()
    errors = _token_errors(name=name, scopes=scopes, expires_at=expires_at, parent=parent, now=now)
    if errors:
        raise ValidationError(errors)
    minted = tokens.mint(TOKEN_PREFIX)
    token = ApiToken(
        user=user,
        name=name.strip(),
        prefix=minted.prefix,
        digest=minted.digest,
        scopes=sorted(set(scopes)),
        expires_at=_token_expiry(expires_at=expires_at, parent=parent, now=now),
        parent=parent,
    )
    token.full_clean()
    token.save()
    audit_record(
        actor=user,
        action="token.create",
        obj=token,
        after=snapshot(token, exclude=("digest",)),
        request=request,
    )
    return token, minted.secret


def _token_descendants(token: ApiToken) -> list[int]:
    found: list[int] = []
    frontier = [token.pk]
    while frontier:  # one query per generation; chains are short
        frontier = list(
            ApiToken.objects.filter(parent_id__in=frontier).exclude(pk__in=found).values_list("pk", flat=True)
        )
        found.extend(frontier)
    return found


def token_revoke(*, actor: User, token: ApiToken, request: HttpRequest | None = None) -> ApiToken:
    """Revoke a token and every token created through it, their children included."""
    if token.user_id != actor.pk and not is_operator(actor):
        raise PermissionDenied("That token is not yours.")
    now = timezone.now()
    with transaction.atomic():
        if token.revoked_at is None:
            token.revoked_at = now
            token.save(update_fields=["revoked_at"])
            audit_record(actor=actor, action="token.revoke", obj=token, request=request)
        children = ApiToken.objects.filter(pk__in=_token_descendants(token), revoked_at__isnull=True)
        for child in children:
            audit_record(
                actor=actor,
                action="token.revoke",
                obj=child,
                after={"with_parent": token.prefix},
                request=request,
            )
        children.update(revoked_at=now)
    return token


def token_authenticate(*, secret: str, ip: str | None) -> ApiToken | None:
    """The token for a presented secret, if it is valid now; records last use (at most once a minute)."""
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(secret)).first()
    now = timezone.now()
    if token is None or not token.is_usable(now) or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now, last_used_ip=ip)
    return token


def user_set_notifications(
    *, user: User, email: bool, events: Mapping[str, bool], request: HttpRequest | None = None
) -> User:
    """Save which job events email `user` (`email` off: none do). `events` names every NotifyEvent."""
    unknown = sorted(set(events) - set(NotifyEvent.values))
    missing = sorted(set(NotifyEvent.values) - set(events))
    if unknown or missing:
        raise ValidationError(
            {
                **{k: ["Not a notification event."] for k in unknown},
                **{k: ["Say on or off."] for k in missing},
            }
        )
    before = {"notify_by_email": user.notify_by_email, "email_muted": list(user.email_muted)}
    user.notify_by_email = email
    user.email_muted = [event for event in NotifyEvent.values if not events[event]]
    user.save(update_fields=["notify_by_email", "email_muted"])
    after = {"notify_by_email": email, "email_muted": user.email_muted}
    audit_record(
        actor=user, action="user.notifications", obj=user, before=before, after=after, request=request
    )
    return user
