"""Services: membership rules, quota ownership, tokens — and that each writes the audit log."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from accounts import services
from accounts.choices import Role, TokenScope
from accounts.models import ApiToken, AuditLog, Membership, Project, Quota
from tests.fixtures.personas import World, make_user

pytestmark = pytest.mark.django_db


def test_manager_adds_a_member_and_it_is_audited(world: World) -> None:
    newcomer = make_user("nina@example.com")
    membership = services.membership_add(
        actor=world.owner, project=world.alpha, user=newcomer, role=Role.VIEWER
    )
    assert membership.role == Role.VIEWER
    entry = AuditLog.objects.get(action="membership.add")
    assert entry.actor == world.owner
    assert entry.project == world.alpha
    assert entry.after is not None
    assert entry.after["role"] == "viewer"


def test_member_cannot_manage_members(world: World) -> None:
    with pytest.raises(PermissionDenied):
        services.membership_add(
            actor=world.member, project=world.alpha, user=world.outsider, role=Role.MEMBER
        )
    assert not Membership.objects.filter(project=world.alpha, user=world.outsider).exists()


def test_manager_of_another_project_cannot_manage_alpha(world: World) -> None:
    bob = Membership.objects.get(project=world.alpha, user=world.member)
    with pytest.raises(PermissionDenied):
        services.membership_update(actor=world.outsider, membership=bob, role=Role.MANAGER)
    bob.refresh_from_db()
    assert bob.role == Role.MEMBER


def test_duplicate_membership_is_a_clear_error(world: World) -> None:
    with pytest.raises(ValidationError, match="already a member"):
        services.membership_add(actor=world.owner, project=world.alpha, user=world.member, role=Role.MEMBER)


def test_the_last_manager_cannot_leave_or_be_demoted(world: World) -> None:
    alice = Membership.objects.get(project=world.alpha, user=world.owner)
    with pytest.raises(ValidationError, match="at least one manager"):
        services.membership_update(actor=world.owner, membership=alice, role=Role.MEMBER)
    with pytest.raises(ValidationError, match="at least one manager"):
        services.membership_remove(actor=world.owner, membership=alice)
    assert Membership.objects.filter(pk=alice.pk, role=Role.MANAGER).exists()


def test_manager_cannot_raise_own_quota(world: World) -> None:
    quota = world.alpha.quota
    with pytest.raises(PermissionDenied):
        services.quota_update(actor=world.owner, quota=quota, changes={"gpus": 64})
    assert Quota.objects.get(pk=quota.pk).gpus == 8


def test_operator_changes_quota_with_before_and_after(world: World) -> None:
    services.quota_update(actor=world.admin, quota=world.alpha.quota, changes={"gpus": 12})
    entry = AuditLog.objects.get(action="quota.update")
    assert (entry.before or {})["gpus"] == 8
    assert (entry.after or {})["gpus"] == 12


def test_quota_update_rejects_unknown_and_negative_fields(world: World) -> None:
    with pytest.raises(ValidationError) as unknown:
        services.quota_update(actor=world.admin, quota=world.alpha.quota, changes={"project_id": 2})
    assert "project_id" in unknown.value.message_dict
    with pytest.raises(ValidationError):
        services.quota_update(actor=world.admin, quota=world.alpha.quota, changes={"max_runtime_minutes": 0})
    assert Quota.objects.get(pk=world.alpha.quota.pk).max_runtime_minutes == 24 * 60


def test_project_slug_must_be_a_dns_label(world: World) -> None:
    for bad in ("Has-Caps", "-leading", "trailing-", "under_score", "dots.bad", "x" * 41):
        with pytest.raises(ValidationError):
            services.project_create(actor=world.admin, slug=bad, name="Bad")
    assert not Project.objects.exclude(slug__in=["alpha", "beta"]).exists()


def test_only_operators_create_projects(world: World) -> None:
    with pytest.raises(PermissionDenied):
        services.project_create(actor=world.owner, slug="gamma", name="Gamma")
    project = services.project_create(actor=world.admin, slug="gamma", name="Gamma")
    assert project.namespace == "gp-gamma"
    assert Quota.objects.filter(project=project).exists()


def test_token_secret_is_not_stored(world: World) -> None:
    token, secret = services.token_create(
        user=world.member, name="cli", scopes=[TokenScope.READ], expires_at=None
    )
    stored = ApiToken.objects.get(pk=token.pk)
    assert secret not in (stored.digest, stored.prefix, stored.name)
    assert stored.digest == services.token_digest(secret)
    assert services.token_authenticate(secret=secret, ip="127.0.0.1") == token
    assert services.token_authenticate(secret=stored.digest, ip="127.0.0.1") is None


def test_token_validation_messages(world: World) -> None:
    with pytest.raises(ValidationError) as exc:
        services.token_create(
            user=world.member, name=" ", scopes=["root"], expires_at=timezone.now() - timedelta(days=1)
        )
    assert set(exc.value.message_dict) == {"name", "scopes", "expires_at"}
    assert not ApiToken.objects.exists()


def test_revoked_and_expired_tokens_do_not_authenticate(world: World) -> None:
    token, secret = services.token_create(user=world.member, name="a", scopes=["read"], expires_at=None)
    services.token_revoke(actor=world.member, token=token)
    assert services.token_authenticate(secret=secret, ip=None) is None
    soon = timezone.now() + timedelta(seconds=1)
    old, old_secret = services.token_create(user=world.member, name="b", scopes=["read"], expires_at=soon)
    ApiToken.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert services.token_authenticate(secret=old_secret, ip=None) is None


def test_someone_elses_token_cannot_be_revoked(world: World) -> None:
    token, _ = services.token_create(user=world.member, name="a", scopes=["read"], expires_at=None)
    with pytest.raises(PermissionDenied):
        services.token_revoke(actor=world.outsider, token=token)
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_disabled_users_tokens_stop_working(world: World) -> None:
    _, secret = services.token_create(user=world.member, name="a", scopes=["read"], expires_at=None)
    world.member.is_active = False
    world.member.save(update_fields=["is_active"])
    assert services.token_authenticate(secret=secret, ip=None) is None
