"""What operators change in the admin outside save_model/delete_model is audited too: inline rows (added,
changed, deleted, with a before picture), a user's password, a user's second factor."""

from __future__ import annotations

from typing import Any

import pytest
from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from allauth.socialaccount.models import SocialAccount
from django.contrib import admin
from django.test import Client, RequestFactory

from accounts.admin import AuditedAdmin
from accounts.choices import Role
from accounts.models import AuditLog, Membership, UserCap
from tests.fixtures.personas import World, session_client

pytestmark = pytest.mark.django_db


def _project_form(world: World, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The project change form as the admin posts it: the quota as it is, memberships as given."""
    quota = world.alpha.quota
    form: dict[str, Any] = {
        "slug": "alpha",
        "name": world.alpha.name,
        "description": "",
        "is_active": "on",
        "quota-TOTAL_FORMS": "1",
        "quota-INITIAL_FORMS": "1",
        "quota-0-id": quota.pk,
        "quota-0-project": world.alpha.pk,
        **{
            f"quota-0-{name}": getattr(quota, name)
            for name in ("gpus", "mps_slices", "cpu_millicores", "memory_mib", "max_concurrent_jobs")
        },
        "quota-0-max_runtime_minutes": quota.max_runtime_minutes,
        "user_caps-TOTAL_FORMS": "0",
        "user_caps-INITIAL_FORMS": "0",
        "memberships-TOTAL_FORMS": str(len(rows)),
        "memberships-INITIAL_FORMS": str(sum(1 for r in rows if r.get("id"))),
    }
    for i, row in enumerate(rows):
        form.update({f"memberships-{i}-{key}": value for key, value in row.items()})
        form[f"memberships-{i}-project"] = world.alpha.pk
    return form


def _row(m: Membership, **changes: Any) -> dict[str, Any]:
    return {"id": m.pk, "user": m.user_id, "role": m.role, **changes}


def _post_project(client: Client, world: World, rows: list[dict[str, Any]]) -> None:
    response = client.post(f"/admin/accounts/project/{world.alpha.pk}/change/", _project_form(world, rows))
    assert response.status_code == 302, response.content.decode()[:3000]


def test_an_inline_deletion_is_audited_with_what_was_deleted(world: World) -> None:
    memberships = list(world.alpha.memberships.order_by("pk"))
    viewer = next(m for m in memberships if m.user_id == world.viewer.pk)
    rows = [_row(m, DELETE="on") if m == viewer else _row(m) for m in memberships]
    _post_project(session_client(world.admin), world, rows)
    assert not Membership.objects.filter(pk=viewer.pk).exists()
    entry = AuditLog.objects.get(action="admin.inline.delete")
    assert entry.object_type == "accounts.Membership"
    assert entry.object_id == str(viewer.pk)
    assert entry.actor == world.admin
    assert entry.project == world.alpha
    assert entry.before is not None
    assert entry.before["user"] == world.viewer.pk
    assert entry.before["role"] == Role.VIEWER


def test_an_inline_change_is_audited_with_before_and_after(world: World) -> None:
    memberships = list(world.alpha.memberships.order_by("pk"))
    viewer = next(m for m in memberships if m.user_id == world.viewer.pk)
    rows = [_row(m, role=Role.MEMBER) if m == viewer else _row(m) for m in memberships]
    _post_project(session_client(world.admin), world, rows)
    entry = AuditLog.objects.get(action="admin.inline.change")
    assert entry.object_id == str(viewer.pk)
    assert entry.before is not None
    assert entry.before["role"] == Role.VIEWER
    assert entry.after is not None
    assert entry.after["role"] == Role.MEMBER


def test_an_inline_addition_is_audited(world: World) -> None:
    client = session_client(world.admin)
    form = _project_form(world, [_row(m) for m in world.alpha.memberships.order_by("pk")])
    form.update({"user_caps-TOTAL_FORMS": "1", "user_caps-0-user": world.member.pk, "user_caps-0-gpus": "2"})
    form.update({"user_caps-0-project": world.alpha.pk})
    response = client.post(f"/admin/accounts/project/{world.alpha.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    cap = UserCap.objects.get(project=world.alpha)
    entry = AuditLog.objects.get(action="admin.inline.add")
    assert (entry.object_type, entry.object_id) == ("accounts.UserCap", str(cap.pk))
    assert entry.after is not None
    assert entry.after["gpus"] == 2


def test_a_password_set_in_the_admin_is_audited_without_the_password(world: World) -> None:
    client = session_client(world.admin)
    new = "an operator chose this 17"
    response = client.post(
        f"/admin/accounts/user/{world.member.pk}/password/",
        {"password1": new, "password2": new, "usable_password": "true"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    world.member.refresh_from_db()
    assert world.member.check_password(new)
    entry = AuditLog.objects.get(action="password.change")
    assert (entry.actor, entry.object_id) == (world.admin, str(world.member.pk))
    assert new not in str(entry.after)
    assert "pbkdf2" not in str(entry.after)


def test_an_authenticator_removed_in_the_admin_is_audited_without_its_secret(world: World) -> None:
    authenticator = Authenticator.objects.get(user=world.admin)
    client = session_client(world.admin)
    response = client.post(f"/admin/mfa/authenticator/{authenticator.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.content.decode()[:3000]
    entry = AuditLog.objects.get(action="admin.delete", object_type="mfa.Authenticator")
    assert entry.object_id == str(authenticator.pk)
    assert entry.before is not None
    assert entry.before["type"] == Authenticator.Type.TOTP
    assert "data" not in entry.before
    assert "JBSWY3DPEHPK3PXP" not in str(entry.before)


def test_an_address_marked_verified_in_the_admin_is_audited_with_the_operator(world: World) -> None:
    address = EmailAddress.objects.get(user=world.member)
    EmailAddress.objects.filter(pk=address.pk).update(verified=False)
    client = session_client(world.admin)
    response = client.post(
        "/admin/account/emailaddress/", {"action": "make_verified", "_selected_action": [address.pk]}
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    entry = AuditLog.objects.get(action="email.verify")
    assert entry.actor == world.admin
    assert entry.object_id == str(world.member.pk)


def test_an_address_edited_in_the_admin_is_audited(world: World) -> None:
    address = EmailAddress.objects.get(user=world.member)
    client = session_client(world.admin)
    response = client.post(
        f"/admin/account/emailaddress/{address.pk}/change/",
        {"user": world.member.pk, "email": "bob@elsewhere.example.com", "verified": "on", "primary": "on"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    entry = AuditLog.objects.get(action="admin.change", object_type="account.EmailAddress")
    assert entry.before is not None
    assert entry.before["email"] == "bob@example.com"
    assert entry.after is not None
    assert entry.after["email"] == "bob@elsewhere.example.com"


def test_the_authenticator_admin_never_shows_the_secret(world: World) -> None:
    authenticator = Authenticator.objects.get(user=world.admin)
    client = session_client(world.admin)
    page = client.get(f"/admin/mfa/authenticator/{authenticator.pk}/change/")
    assert page.status_code == 200
    assert "JBSWY3DPEHPK3PXP" not in page.content.decode()
    assert client.get("/admin/mfa/authenticator/add/").status_code == 403


def test_every_admin_that_can_write_is_audited(rf: RequestFactory, world: World) -> None:
    """An admin someone adds later (or a package registers) with add, change or delete: audited too."""
    request = rf.get("/admin/")
    request.user = world.admin
    unaudited = [
        model._meta.label
        for model, model_admin in admin.site._registry.items()
        if not isinstance(model_admin, AuditedAdmin)
        and (
            model_admin.has_add_permission(request)
            or model_admin.has_change_permission(request)
            or model_admin.has_delete_permission(request)
        )
    ]
    assert unaudited == []


def test_an_unlinked_sign_in_identity_is_audited(world: World) -> None:
    """Removing a user's OIDC identity in the admin (allauth's own admin, with the audit in front)."""
    identity = SocialAccount.objects.create(user=world.member, provider="oidc", uid="sub-123")
    client = session_client(world.admin)
    response = client.post(f"/admin/socialaccount/socialaccount/{identity.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.content.decode()[:3000]
    entry = AuditLog.objects.get(action="admin.delete", object_type="socialaccount.SocialAccount")
    assert entry.actor == world.admin
    assert entry.before is not None
    assert entry.before["uid"] == "sub-123"
