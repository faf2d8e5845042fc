"""Project volumes' claims: the pure builder (dict equality), the reconciler against the fake
client (create, grow, never adopt or delete), and what the namespace reconcile writes back."""

from __future__ import annotations

import pytest

from accounts.models import Project
from tests.fixtures.personas import World
from workloads.k8s import paths
from workloads.k8s.claims import ClaimStatus, api_message, build_claim, quantity_bytes
from workloads.k8s.errors import K8sError, K8sTransientError
from workloads.k8s.reconcilers.claim import CONFLICT, ClaimReconciler
from workloads.models import ProjectVolume, VolumeAccessMode
from workloads.services.cluster_sync import namespace_sync
from workloads.tests.fakes import FakeKube

NS = "gp-alpha"
CLAIM = paths.claim(NS, "alpha-scratch")


def new_volume(**fields: object) -> ProjectVolume:
    base: dict[str, object] = {
        "project": Project(slug="alpha", name="Alpha"),
        "name": "scratch",
        "claim_name": "alpha-scratch",
        "storage_class": "fast-ssd",
        "size_gib": 100,
        "access_mode": VolumeAccessMode.READ_WRITE_MANY,
    }
    return ProjectVolume(**{**base, **fields})


def test_the_claim_builder_asks_for_class_mode_and_size_with_the_portals_labels() -> None:
    assert build_claim(new_volume(), NS) == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "alpha-scratch",
            "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpuportal.dev/project": "alpha"},
        },
        "spec": {
            "storageClassName": "fast-ssd",
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "100Gi"}},
        },
    }


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("100Gi", 100 * 1024**3),
        ("5G", 5 * 10**9),
        ("1073741824", 1024**3),
        ("1.5Ti", int(1.5 * 1024**4)),
        ("500m", None),
        ("", None),
        ("ki", None),
    ],
)
def test_storage_quantities_are_read_in_bytes(text: str, size: int | None) -> None:
    assert quantity_bytes(text) == size


def test_a_new_claim_is_created_once_and_reports_a_missing_storage_class() -> None:
    kube = FakeKube()
    status = ClaimReconciler(new_volume(), kube, namespace=NS).converge()
    assert kube.objects[CLAIM]["spec"]["storageClassName"] == "fast-ssd"
    assert status == ClaimStatus("Pending", "no StorageClass fast-ssd in the cluster")
    kube.objects[paths.storage_class("fast-ssd")] = {"metadata": {"name": "fast-ssd"}}
    kube.calls.clear()
    assert ClaimReconciler(new_volume(), kube, namespace=NS).converge() == ClaimStatus("Pending")
    assert ("POST", paths.claims(NS)) not in kube.calls


def test_a_bigger_size_grows_the_claim_and_a_smaller_one_never_shrinks_it() -> None:
    kube = FakeKube()
    ClaimReconciler(new_volume(), kube, namespace=NS).converge()
    ClaimReconciler(new_volume(size_gib=200), kube, namespace=NS).converge()
    assert kube.objects[CLAIM]["spec"]["resources"]["requests"]["storage"] == "200Gi"
    kube.calls.clear()
    ClaimReconciler(new_volume(size_gib=50), kube, namespace=NS).converge()
    assert kube.objects[CLAIM]["spec"]["resources"]["requests"]["storage"] == "200Gi"
    assert ("PATCH", CLAIM) not in kube.calls


def test_a_refused_expansion_is_reported_and_the_claim_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = FakeKube()
    ClaimReconciler(new_volume(), kube, namespace=NS).converge()
    refusal = '{"kind": "Status", "message": "only dynamically provisioned pvc can be resized"}'

    def refuse(path: str, body: object, *, apply: bool = False) -> None:
        raise K8sError(403, refusal)

    monkeypatch.setattr(kube, "patch", refuse)
    status = ClaimReconciler(new_volume(size_gib=300), kube, namespace=NS).converge()
    assert status.message == "could not grow to 300Gi: only dynamically provisioned pvc can be resized"
    assert CLAIM in kube.objects


def test_a_claim_the_portal_did_not_make_is_a_conflict_and_left_untouched() -> None:
    kube = FakeKube()
    theirs = {"metadata": {"name": "alpha-scratch", "labels": {}}, "spec": {"resources": {"requests": {}}}}
    kube.objects[CLAIM] = theirs
    status = ClaimReconciler(new_volume(size_gib=500), kube, namespace=NS).converge()
    assert status == ClaimStatus("Conflict", CONFLICT)
    assert kube.objects[CLAIM] is theirs
    assert [c for c in kube.calls if c[0] != "GET"] == []


def test_an_existing_claim_is_only_read_and_a_missing_one_is_said() -> None:
    kube = FakeKube()
    volume = new_volume(storage_class="", size_gib=None, claim_name="alpha-scratch")
    assert ClaimReconciler(volume, kube, namespace=NS).converge().phase == "Missing"
    kube.objects[CLAIM] = {
        "metadata": {"name": "alpha-scratch"},
        "status": {"phase": "Bound", "capacity": {"storage": "1Ti"}},
    }
    assert ClaimReconciler(volume, kube, namespace=NS).converge() == ClaimStatus("Bound", "capacity 1Ti")
    assert [c[0] for c in kube.calls] == ["GET", "GET"]


def test_the_reconciler_cannot_delete_a_claim() -> None:
    with pytest.raises(NotImplementedError):
        ClaimReconciler(new_volume(), FakeKube(), namespace=NS).down()


def test_api_messages_are_read_from_a_status_body() -> None:
    assert api_message('{"message": "exceeded quota"}') == "exceeded quota"
    assert api_message("plain words") == "plain words"


@pytest.mark.django_db
def test_the_namespace_reconcile_makes_the_claims_and_writes_their_phase_back(world: World) -> None:
    kube = FakeKube()
    made = ProjectVolume.objects.create(
        project=world.alpha, name="scratch", claim_name="alpha-scratch", storage_class="fast-ssd", size_gib=10
    )
    existing = ProjectVolume.objects.create(project=world.alpha, name="data", claim_name="alpha-data")
    namespace_sync(project=world.alpha, client=kube)
    made.refresh_from_db()
    existing.refresh_from_db()
    assert kube.objects[paths.claim(world.alpha.namespace, "alpha-scratch")]["spec"]["resources"] == {
        "requests": {"storage": "10Gi"}
    }
    assert (made.phase, made.status_message) == ("Pending", "no StorageClass fast-ssd in the cluster")
    assert (existing.phase, existing.synced_at is not None) == ("Missing", True)
    assert paths.claim(world.alpha.namespace, "alpha-data") not in kube.objects


@pytest.mark.django_db
def test_a_refused_claim_is_an_error_on_its_row_and_a_transient_one_retries(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube = FakeKube()
    volume = ProjectVolume.objects.create(
        project=world.alpha, name="scratch", claim_name="alpha-scratch", storage_class="fast", size_gib=10
    )
    answers: list[K8sError] = [
        K8sError(403, '{"message": "exceeded quota: storage"}'),
        K8sTransientError(503),
    ]

    def create(path: str, body: object, *, dry_run: bool = False) -> None:
        raise answers.pop(0)

    monkeypatch.setattr(kube, "create", create)
    namespace_sync(project=world.alpha, client=kube)
    volume.refresh_from_db()
    assert (volume.phase, volume.status_message) == ("Error", "exceeded quota: storage")
    with pytest.raises(K8sTransientError):
        namespace_sync(project=world.alpha, client=kube)
