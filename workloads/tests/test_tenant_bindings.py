"""Tenant RoleBindings (the chart's GPUPORTAL_TENANT_ROLE_BINDINGS) and the separate provisioner:
with one configured, the worker asks it for namespace writes instead of making them."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from accounts.models import Project
from portal.settings import environment
from tests.fixtures.personas import World
from workloads.choices import TaskName
from workloads.k8s import builders, paths
from workloads.k8s.errors import K8sError, K8sTransientError
from workloads.services import jobs as services
from workloads.services.cluster_sync import job_reconcile, namespace_reconcile
from workloads.tests.conftest import IMAGE, capture_sends
from workloads.tests.fakes import FakeKube

BINDINGS = {"gp-tenant": ["portal:gp-worker"], "gp-tenant-read": ["portal:gp-web"]}


def test_one_binding_per_tenant_role_naming_only_the_given_service_accounts() -> None:
    docs = builders.build_tenant_role_bindings(Project(slug="alpha"), {"r1": [("portal", "w")]})
    assert docs == [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": "r1",
                "namespace": "gp-alpha",
                "labels": {"app.kubernetes.io/managed-by": "gpu-portal"},
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r1"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "portal", "name": "w"}],
        }
    ]


@pytest.mark.django_db
def test_the_namespace_reconcile_applies_the_bindings_and_recreates_a_changed_role(world: World) -> None:
    fake = FakeKube()
    with override_settings(GPUPORTAL_TENANT_ROLE_BINDINGS=BINDINGS):
        kinds = namespace_reconcile(project_id=world.alpha.pk, client=fake)
        assert kinds[-2:] == ["RoleBinding", "RoleBinding"]
        path = paths.role_binding(world.alpha.namespace, "gp-tenant")
        assert fake.objects[path]["subjects"] == [
            {"kind": "ServiceAccount", "namespace": "portal", "name": "gp-worker"}
        ]
        fake.objects[path]["roleRef"]["name"] = "cluster-admin"  # someone rebound it
        namespace_reconcile(project_id=world.alpha.pk, client=fake)
    assert fake.objects[path]["roleRef"]["name"] == "gp-tenant"
    assert ("DELETE", path) in fake.calls


@pytest.mark.django_db
def test_without_bindings_configured_no_role_binding_is_made(world: World) -> None:
    fake = FakeKube()
    assert "RoleBinding" not in namespace_reconcile(project_id=world.alpha.pk, client=fake)
    assert not [p for p in fake.objects if "/rolebindings/" in p]


class NoNamespaceKube(FakeKube):
    """The tenant namespace does not exist yet: creating a Job there answers 404."""

    def create(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any] | None:
        if path.startswith("/apis/batch/"):
            raise K8sError(404, "namespaces not found")
        return super().create(path, body, dry_run=dry_run)


@pytest.mark.django_db
def test_with_a_separate_provisioner_the_worker_asks_it_and_retries(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    asked = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    fake = NoNamespaceKube()
    with (
        override_settings(GPUPORTAL_PROVISIONER_QUEUE="provision"),
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(K8sTransientError),
    ):
        job_reconcile(job_id=job.pk, client=fake)
    assert asked[-1] == jobs_world.alpha.pk
    assert [c for c in fake.calls if c[0] != "GET"] == []  # it wrote no namespace or guard rail itself


@pytest.mark.django_db
def test_without_one_the_worker_makes_the_namespace_itself(jobs_world: World) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    fake = NoNamespaceKube()
    with pytest.raises(K8sError) as second:  # the retry's create still 404s in this fake
        job_reconcile(job_id=job.pk, client=fake)
    assert second.value.status == 404
    assert paths.namespace(jobs_world.alpha.namespace) in fake.objects


@pytest.mark.parametrize("raw", ["{not json", '["a:b"]', '{"role": ["no-colon"]}', '{"role": "a:b"}'])
def test_malformed_bindings_stop_the_start(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="GPUPORTAL_TENANT_ROLE_BINDINGS"):
        environment._tenant_role_bindings(raw)
