"""Operators define project volumes in the admin: an existing claim or a new one the portal creates.

Every save and delete is audited; a save asks for the namespace reconcile after commit (which makes
the claim); a bad value is a field error with no row and nothing sent; a delete keeps the claim."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import AuditLog
from tests.fixtures.personas import World
from workloads.choices import TaskName
from workloads.models import ProjectVolume
from workloads.tests.conftest import capture_sends

pytestmark = pytest.mark.django_db
ADD = "/admin/workloads/projectvolume/add/"


def _admin(world: World) -> Client:
    client = Client()
    client.force_login(world.admin)
    return client


def _form(world: World, **fields: Any) -> dict[str, Any]:
    base = {
        "project": str(world.alpha.pk),
        "name": "scratch",
        "claim_name": "alpha-scratch",
        "storage_class": "fast-ssd",
        "size_gib": "100",
        "access_mode": "ReadWriteOnce",
    }
    return {**base, **fields}


def _post(world: World, url: str, form: dict[str, Any], capture: Any) -> Any:
    with capture(execute=True):
        return _admin(world).post(url, form)


def test_an_operator_adds_a_new_claim_and_an_existing_one(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    refreshed = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    response = _post(world, ADD, _form(world), django_capture_on_commit_callbacks)
    assert response.status_code == 302, response.content.decode()[:1500]
    made = ProjectVolume.objects.get(name="scratch")
    assert (made.storage_class, made.size_gib, made.access_mode, made.creates_claim) == (
        "fast-ssd",
        100,
        "ReadWriteOnce",
        True,
    )
    existing = _form(
        world, name="data", claim_name="team-data", storage_class="", size_gib="", read_only="on"
    )
    assert _post(world, ADD, existing, django_capture_on_commit_callbacks).status_code == 302
    assert ProjectVolume.objects.get(name="data").read_only is True
    assert refreshed == [world.alpha.pk, world.alpha.pk]
    audit = AuditLog.objects.get(action="admin.add", object_id=str(made.pk))
    assert (audit.actor, audit.project, (audit.after or {})["size_gib"]) == (world.admin, world.alpha, 100)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"storage_class": "Fast_SSD"}, "storage_class", "lower-case letters"),
        ({"size_gib": "0"}, "size_gib", "greater than or equal to 1"),
        ({"size_gib": ""}, "size_gib", "needs a size"),
        ({"storage_class": "", "size_gib": "5"}, "size_gib", "Only a claim the portal creates has a size"),
        ({"claim_name": "Alpha_Scratch"}, "claim_name", "lower-case letters"),
        ({"access_mode": "ReadOnlyMany"}, "read_only", "only be mounted read-only"),
        ({"size_gib": str(2 * 1024 * 1024)}, "size_gib", "less than or equal to"),
    ],
)
def test_a_bad_value_is_a_field_error_and_nothing_is_made(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    fields: dict[str, str],
    field: str,
    words: str,
) -> None:
    refreshed = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    response = _post(world, ADD, _form(world, **fields), django_capture_on_commit_callbacks)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert words in " ".join(errors[field]), errors
    assert not ProjectVolume.objects.exists()
    assert refreshed == []
    assert not AuditLog.objects.filter(object_type="workloads.ProjectVolume").exists()


@pytest.mark.parametrize("storage_class", ["fast-ssd", ""])
def test_a_new_claim_named_by_another_volume_of_the_project_is_a_clash(
    world: World, django_capture_on_commit_callbacks: Any, storage_class: str
) -> None:
    ProjectVolume.objects.create(
        project=world.alpha,
        name="first",
        claim_name="alpha-scratch",
        storage_class=storage_class,
        size_gib=10 if storage_class else None,
    )
    response = _post(world, ADD, _form(world), django_capture_on_commit_callbacks)
    assert response.status_code == 200
    assert "already names the claim alpha-scratch" in " ".join(
        response.context["adminform"].form.errors["claim_name"]
    )
    assert ProjectVolume.objects.count() == 1


def test_another_project_may_use_the_same_claim_name_and_a_read_only_view_may_refer_to_a_new_claim(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    assert _post(world, ADD, _form(world), django_capture_on_commit_callbacks).status_code == 302
    beta = _form(world, project=str(world.beta.pk))
    assert _post(world, ADD, beta, django_capture_on_commit_callbacks).status_code == 302
    view = _form(world, name="scratch-ro", storage_class="", size_gib="", read_only="on")
    assert _post(world, ADD, view, django_capture_on_commit_callbacks).status_code == 302
    assert ProjectVolume.objects.count() == 3


def test_an_edit_may_grow_a_claim_never_shrink_it_or_change_its_kind(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    volume = ProjectVolume.objects.create(
        project=world.alpha,
        name="scratch",
        claim_name="alpha-scratch",
        storage_class="fast-ssd",
        size_gib=100,
    )
    url = f"/admin/workloads/projectvolume/{volume.pk}/change/"
    refreshed = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    small = {"name": "scratch", "size_gib": "50"}
    response = _post(world, url, small, django_capture_on_commit_callbacks)
    assert "never shrink" in " ".join(response.context["adminform"].form.errors["size_gib"])
    grow = {"name": "scratch", "size_gib": "200", "storage_class": "slow", "claim_name": "other"}
    assert _post(world, url, grow, django_capture_on_commit_callbacks).status_code == 302
    volume.refresh_from_db()
    assert (volume.size_gib, volume.storage_class, volume.claim_name) == (200, "fast-ssd", "alpha-scratch")
    assert refreshed == [world.alpha.pk]
    audit = AuditLog.objects.get(action="admin.change", object_id=str(volume.pk))
    assert ((audit.before or {})["size_gib"], (audit.after or {})["size_gib"]) == (100, 200)


def test_deleting_a_volume_is_audited_and_says_the_claim_is_kept(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    volume = ProjectVolume.objects.create(
        project=world.alpha,
        name="scratch",
        claim_name="alpha-scratch",
        storage_class="fast-ssd",
        size_gib=100,
    )
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    url = f"/admin/workloads/projectvolume/{volume.pk}/delete/"
    with django_capture_on_commit_callbacks(execute=True):
        response = _admin(world).post(url, {"post": "yes"}, follow=True)
    assert not ProjectVolume.objects.filter(pk=volume.pk).exists()
    text = response.content.decode()
    assert "claim alpha-scratch stays in namespace gp-alpha with its data" in text
    deleted = AuditLog.objects.get(action="admin.delete", object_id=str(volume.pk))
    assert (deleted.before or {})["claim_name"] == "alpha-scratch"
    assert sent == []  # nothing is asked of the cluster: the claim stays


def test_the_change_page_explains_both_kinds_and_what_a_delete_keeps(world: World) -> None:
    page = _admin(world).get(ADD).content.decode()
    assert "Existing claim: its name, storage class and size empty." in page
    assert "Deleting the volume keeps the claim and its data." in page


def test_the_check_action_asks_for_one_namespace_reconcile_per_project(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    for project, name in [(world.alpha, "a"), (world.alpha, "b"), (world.beta, "c")]:
        ProjectVolume.objects.create(project=project, name=name, claim_name=name)
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    chosen = [str(pk) for pk in ProjectVolume.objects.values_list("pk", flat=True)]
    form = {"action": "check_claims", "_selected_action": chosen}
    with django_capture_on_commit_callbacks(execute=True):
        response = _admin(world).post("/admin/workloads/projectvolume/", form, follow=True)
    assert "Asked the cluster about 2 project(s)" in response.content.decode()
    assert sorted(sent) == sorted([world.alpha.pk, world.beta.pk])
