"""Project volumes against the real API server: the namespace reconcile creates a portal-made claim
from a StorageClass made here, leaves an operator's own claim alone, and a job mounts claims by name
with readOnly as asked and as the volume forces.

kwok nodes have no volume provisioner, so claims stay Pending: the tests assert the objects and
their specs, not binding.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import wait_for
from tests.workloads_e2e.test_job_lifecycle import submit
from workloads.admission.cycle import admission_cycle
from workloads.k8s import labels, paths
from workloads.k8s.client import RealKubeClient
from workloads.models import Job, ProjectVolume
from workloads.services import jobs as services
from workloads.services.cluster_sync import namespace_reconcile
from workloads.tasks import reconcile_job

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


@pytest.fixture
def storage_class(kube: RealKubeClient) -> Iterator[str]:
    """A StorageClass whose provisioner nobody runs (the claims stay Pending)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/nobody",
        "allowVolumeExpansion": True,
    }
    kube.create(STORAGE_CLASSES, body)
    try:
        yield name
    finally:
        kube.delete(f"{STORAGE_CLASSES}/{name}")


def claim(kube: RealKubeClient, namespace: str, name: str) -> dict[str, Any]:
    body = kube.get(paths.claim(namespace, name))
    assert body is not None, f"no claim {namespace}/{name}"
    return body


def test_a_new_volume_becomes_a_claim_in_the_namespace_from_its_storage_class(
    cluster_world: World, kube: RealKubeClient, storage_class: str
) -> None:
    project = cluster_world.alpha
    volume = ProjectVolume.objects.create(
        project=project,
        name="scratch",
        claim_name="alpha-scratch",
        storage_class=storage_class,
        size_gib=5,
        access_mode="ReadWriteMany",
    )
    namespace_reconcile(project_id=project.pk, client=kube)
    made = claim(kube, project.namespace, "alpha-scratch")
    assert made["spec"]["storageClassName"] == storage_class
    assert made["spec"]["accessModes"] == ["ReadWriteMany"]
    assert made["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert made["metadata"]["labels"][labels.MANAGED_BY] == "gpu-portal"
    assert made["status"]["phase"] == "Pending"
    volume.refresh_from_db()
    assert (volume.phase, volume.status_message) == ("Pending", "")
    # An unbound claim cannot grow (the API server says so): the row says why, the claim is kept.
    ProjectVolume.objects.filter(pk=volume.pk).update(size_gib=8)
    namespace_reconcile(project_id=project.pk, client=kube)
    volume.refresh_from_db()
    assert volume.status_message.startswith("could not grow to 8Gi: "), volume.status_message
    assert (
        claim(kube, project.namespace, "alpha-scratch")["spec"]["resources"]["requests"]["storage"] == "5Gi"
    )
    # Removing the volume keeps the claim: nothing in the portal deletes one.
    ProjectVolume.objects.filter(pk=volume.pk).delete()
    namespace_reconcile(project_id=project.pk, client=kube)
    assert claim(kube, project.namespace, "alpha-scratch")["metadata"]["uid"] == made["metadata"]["uid"]


def test_an_operators_own_claim_is_a_conflict_and_left_as_it_is(
    cluster_world: World, kube: RealKubeClient, storage_class: str
) -> None:
    project = cluster_world.alpha
    namespace_reconcile(project_id=project.pk, client=kube)
    theirs = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "handmade"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    kube.create(paths.claims(project.namespace), theirs)
    volume = ProjectVolume.objects.create(
        project=project, name="hand", claim_name="handmade", storage_class=storage_class, size_gib=50
    )
    namespace_reconcile(project_id=project.pk, client=kube)
    volume.refresh_from_db()
    assert volume.phase == "Conflict"
    kept = claim(kube, project.namespace, "handmade")
    assert kept["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert labels.MANAGED_BY not in (kept["metadata"].get("labels") or {})


def _pod(kube: RealKubeClient, job: Job) -> dict[str, Any] | None:
    body = kube.get(paths.pods(job.namespace), {"labelSelector": f"{labels.UID_LABEL}={job.uid}"})
    items = (body or {}).get("items") or []
    return items[0] if items else None


def test_a_job_mounts_the_claims_by_name_read_only_as_asked_or_forced(
    cluster_world: World, kube: RealKubeClient, storage_class: str
) -> None:
    project = cluster_world.alpha
    ProjectVolume.objects.create(
        project=project, name="scratch", claim_name="alpha-scratch", storage_class=storage_class, size_gib=5
    )
    ProjectVolume.objects.create(project=project, name="view", claim_name="alpha-scratch", read_only=True)
    namespace_reconcile(project_id=project.pk, client=kube)
    mounts = [
        {"volume": "scratch", "mount_path": "/scratch"},
        {"volume": "view", "mount_path": "/view"},  # not asked: the volume forces read-only
        {"volume": "data", "mount_path": "/data", "read_only": True},  # asked by the user
    ]
    job = submit(cluster_world, volumes=mounts, simulate={"run_seconds": 60})
    reconcile_job(job.pk)
    admission_cycle()
    reconcile_job(job.pk)
    pod = wait_for(lambda: _pod(kube, job), 60, "the job's pod created")
    spec = pod["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {
        "vol-0": {"claimName": "alpha-scratch"},
        "vol-1": {"claimName": "alpha-scratch", "readOnly": True},
        "vol-2": {"claimName": "alpha-data", "readOnly": True},
    }
    main = next(c for c in spec["containers"] if c["name"] == "main")
    assert [(m["mountPath"], m.get("readOnly", False)) for m in main["volumeMounts"]] == [
        ("/scratch", False),
        ("/view", True),
        ("/data", True),
    ]
    services.job_cancel(actor=cluster_world.owner, job=job)
    reconcile_job(job.pk)
