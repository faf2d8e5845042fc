"""The operator's admin: every model's list and add pages open, audit log is read-only and exports CSV,
and admin edits land in the audit log."""

from __future__ import annotations

import pytest
from django.contrib import admin

from accounts.models import AuditLog, Quota
from tests.fixtures.personas import World, session_client

pytestmark = pytest.mark.django_db


def test_every_registered_model_changelist_opens(world: World) -> None:
    client = session_client(world.admin)
    for model in admin.site._registry:
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        response = client.get(url)
        assert response.status_code == 200, url
        response = client.get(url, {"q": "alpha"})
        assert response.status_code == 200, url


def test_audit_log_is_read_only_and_exports_csv(world: World) -> None:
    client = session_client(world.admin)
    entry = AuditLog.objects.create(actor=world.owner, actor_repr="alice", action="x.test", object_type="t")
    assert client.get("/admin/accounts/auditlog/add/").status_code == 403
    response = client.post(
        "/admin/accounts/auditlog/", {"action": "export_csv", "_selected_action": [entry.pk]}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    assert "x.test" in response.content.decode()
    assert AuditLog.objects.filter(pk=entry.pk).exists()


def test_the_audit_export_never_hands_a_spreadsheet_a_formula(world: World) -> None:
    client = session_client(world.admin)
    entry = AuditLog.objects.create(
        actor=world.owner, actor_repr='=HYPERLINK("http://evil.example","x")', action="-2+3", object_type="t"
    )
    response = client.post(
        "/admin/accounts/auditlog/", {"action": "export_csv", "_selected_action": [entry.pk]}
    )
    text = response.content.decode()
    assert "'=HYPERLINK(" in text
    assert ",'-2+3," in text
    assert ",=" not in text
    assert not any(line.startswith(("=", "-")) for line in text.splitlines())


def test_quota_edit_in_admin_is_audited(world: World) -> None:
    client = session_client(world.admin)
    quota = world.alpha.quota
    data = {
        "project": world.alpha.pk,
        "gpus": 16,
        "mps_slices": 8,
        "cpu_millicores": 16000,
        "memory_mib": 131072,
        "max_concurrent_jobs": 10,
        "max_runtime_minutes": 60,
        "gpu_type_limits-TOTAL_FORMS": 0,
        "gpu_type_limits-INITIAL_FORMS": 0,
    }
    response = client.post(f"/admin/accounts/quota/{quota.pk}/change/", data)
    assert response.status_code == 302, response.content[:2000]
    assert Quota.objects.get(pk=quota.pk).gpus == 16
    entry = AuditLog.objects.filter(action="admin.change", object_type="accounts.Quota").get()
    assert (entry.before or {})["gpus"] == 8
    assert (entry.after or {})["gpus"] == 16
    assert entry.actor == world.admin
