"""Writes for temporary quota grants.

Members of a project request one; operators approve or refuse it (admin actions); an approved grant
counts in the queue while `starts_at <= now < until` and `grants_expire` (a periodic task) marks it
expired afterwards. Every change is a compare-and-swap on `status` and is audited.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts.audit import audit_record, snapshot
from accounts.models import Project, User
from accounts.selectors import is_operator
from gpu.models import Node
from workloads.models import GrantStatus, QuotaGrant
from workloads.services.jobs import require_submitter
from workloads.services.publisher import namespace_refresh

MAX_GRANT = timedelta(days=31)


def grant_request(
    *,
    actor: User,
    project: Project,
    gpus: int,
    slices: int = 0,
    gpu_type: str = "",
    until: datetime,
    starts_at: datetime | None = None,
    reason: str = "",
    request: HttpRequest | None = None,
) -> QuotaGrant:
    """A member asks for more quota for a while; an operator decides. With `gpu_type` the grant
    also raises the project's limit for that GPU type (docs/queue.md, "Grants")."""
    require_submitter(actor=actor, project=project)
    starts_at = starts_at or timezone.now()
    grant = QuotaGrant(
        project=project,
        requested_by=actor,
        gpus=gpus,
        slices=slices,
        gpu_type=gpu_type.strip(),
        starts_at=starts_at,
        until=until,
        reason=reason[:300],
    )
    _validate(grant)
    with transaction.atomic():
        grant.save()
        audit_record(
            actor=actor,
            action="grant.request",
            obj=grant,
            project=project,
            after=snapshot(grant),
            request=request,
        )
    return grant


def _validate(grant: QuotaGrant) -> None:
    errors: dict[str, list[str]] = {}
    if grant.gpus + grant.slices <= 0:
        errors["gpus"] = ["Ask for at least one GPU or one MPS slice."]
    if grant.until <= grant.starts_at:
        errors["until"] = ["The grant must end after it starts."]
    elif grant.until - grant.starts_at > MAX_GRANT:
        errors["until"] = ["A grant lasts at most 31 days."]
    if grant.until <= timezone.now():
        errors.setdefault("until", []).append("The end is in the past.")
    type_error = gpu_type_error(grant.gpu_type)
    if type_error:
        errors["gpu_type"] = [type_error]
    if errors:
        raise ValidationError(errors)
    grant.full_clean()


def known_gpu_types() -> set[str]:
    """The GPU types a grant may name: the product label (`nvidia.com/gpu.product`) of the nodes
    the gpu app mirrors from the cluster, gone nodes excluded; the queue matches jobs by that label."""
    rows = Node.objects.filter(deleted=False).exclude(gpu_model="").values_list("gpu_model", flat=True)
    return set(rows)


def gpu_type_error(gpu_type: str) -> str:
    """Why a grant may not name `gpu_type` ("" when it may: empty means any type)."""
    if not gpu_type:
        return ""
    known = known_gpu_types()
    if gpu_type in known:
        return ""
    names = ", ".join(sorted(known)) or "none known yet"
    return f"Unknown GPU type {gpu_type!r}: the cluster's GPU types are {names}."


def grant_decide(
    *, actor: User, grant: QuotaGrant, approve: bool, request: HttpRequest | None = None
) -> bool:
    """Approve or refuse a requested grant (operators only); False when it was already decided."""
    if not is_operator(actor):
        raise PermissionDenied("Only operators decide quota grants.")
    status = GrantStatus.APPROVED if approve else GrantStatus.REFUSED
    now = timezone.now()
    with transaction.atomic():
        moved = QuotaGrant.objects.filter(pk=grant.pk, status=GrantStatus.REQUESTED).update(
            status=status, decided_by=actor, decided_at=now
        )
        if moved:
            audit_record(
                actor=actor,
                action=f"grant.{'approve' if approve else 'refuse'}",
                obj=grant,
                project=grant.project,
                before={"status": GrantStatus.REQUESTED},
                after={"status": status},
                request=request,
            )
            if approve:
                namespace_refresh(grant.project_id)
    grant.refresh_from_db()
    return bool(moved)


def grant_edited(*, grant: QuotaGrant, project_before: int | None = None) -> None:
    """An operator edited a grant in the admin: an approved one may have changed size, time or project,
    so its project's ResourceQuota (and the one it left) is applied again."""
    if grant.status != GrantStatus.APPROVED:
        return
    for project_id in {grant.project_id, project_before or grant.project_id}:
        namespace_refresh(project_id)


def grants_expire(*, now: datetime | None = None) -> list[int]:
    """Approved grants past their end, and requests never decided before their end, expire."""
    now = now or timezone.now()
    done = []
    due = QuotaGrant.objects.filter(
        status__in=(GrantStatus.APPROVED, GrantStatus.REQUESTED), until__lte=now
    ).select_related("project")
    for grant in due:
        with transaction.atomic():
            if QuotaGrant.objects.filter(pk=grant.pk, status=grant.status).update(status=GrantStatus.EXPIRED):
                audit_record(
                    actor=None,
                    action="grant.expire",
                    obj=grant,
                    project=grant.project,
                    before={"status": grant.status},
                    after={"status": GrantStatus.EXPIRED},
                )
                done.append(grant.pk)
                if grant.status == GrantStatus.APPROVED:
                    namespace_refresh(grant.project_id)
    return done


def grants_started(*, since: datetime, now: datetime | None = None) -> list[int]:
    """Projects whose approved grant began in (since, now]: their ResourceQuota grows now."""
    now = now or timezone.now()
    ids = sorted(
        set(
            QuotaGrant.objects.filter(
                status=GrantStatus.APPROVED, starts_at__gt=since, starts_at__lte=now, until__gt=now
            ).values_list("project_id", flat=True)
        )
    )
    for project_id in ids:
        namespace_refresh(project_id)
    return ids


def grants_tick(*, now: datetime | None = None) -> list[int]:
    """The periodic run (every 60 s): grants that began in the last 2 minutes raise their project's
    ResourceQuota (re-applying is idempotent, so the overlap is harmless), then due grants expire.
    Returns the ids expired."""
    now = now or timezone.now()
    grants_started(since=now - timedelta(minutes=2), now=now)
    return grants_expire(now=now)
