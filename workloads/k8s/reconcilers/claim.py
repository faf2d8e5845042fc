"""A project volume's PersistentVolumeClaim: made when the portal creates the volume, grown when an
operator raises its size, never deleted (the data outlives the admin row; see the operator guide).

A claim of the same name that the portal did not make is left exactly as it is and reported as a
conflict: the portal never adopts, resizes or rewrites an operator's own claim. An existing-claim
volume is only read, so the admin can show whether it is there and bound.
"""

from __future__ import annotations

from workloads.k8s import paths
from workloads.k8s.claims import (
    ClaimStatus,
    api_message,
    build_claim,
    claim_status,
    made_by_portal,
    requested_bytes,
)
from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError, K8sTransientError
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler
from workloads.models import ProjectVolume

CONFLICT = "a claim of this name exists that the portal did not make; it is left as it is"


class ClaimReconciler(Reconciler[ProjectVolume]):
    kind = "PersistentVolumeClaim"

    def __init__(self, owner: ProjectVolume, client: KubeClient, *, namespace: str) -> None:
        super().__init__(owner, client)
        self.namespace = namespace

    @property
    def path(self) -> str:
        return paths.claim(self.namespace, self.owner.claim_name)

    @property
    def collection(self) -> str:
        return paths.claims(self.namespace)

    def desired(self) -> Obj:
        return build_claim(self.owner, self.namespace)

    def reconcile(self, current: Obj, desired: Obj) -> None:
        want, have = requested_bytes(desired), requested_bytes(current)
        if want is not None and have is not None and want > have:
            raise NeedsUpdate  # grow only: Kubernetes refuses to shrink a claim

    def update(self, current: Obj, desired: Obj) -> Obj:
        return self.client.patch(self.path, {"spec": {"resources": desired["spec"]["resources"]}})

    def delete(self) -> bool:
        raise NotImplementedError("the portal never deletes a volume's claim")

    def converge(self) -> ClaimStatus:
        """Create or grow the claim as the row asks (existing claims: only read); what it shows now."""
        current = self.current()
        if not self.owner.creates_claim:
            if current is None:
                return ClaimStatus("Missing", f"no claim {self.owner.claim_name} in {self.namespace}")
            return claim_status(current)
        desired = self.desired()
        if current is None:
            current = self.client.create(self.collection, desired) or self.current() or {}
        if not made_by_portal(current):
            return ClaimStatus("Conflict", CONFLICT)
        return self._grown(current, desired) or self._pending_why(claim_status(current))

    def _grown(self, current: Obj, desired: Obj) -> ClaimStatus | None:
        try:
            self.reconcile(current, desired)
        except NeedsUpdate:
            try:
                return claim_status(self.update(current, desired))
            except K8sTransientError:
                raise
            except K8sError as exc:  # the StorageClass may not allow expansion: say so, keep the claim
                size = desired["spec"]["resources"]["requests"]["storage"]
                return ClaimStatus(
                    claim_status(current).phase, f"could not grow to {size}: {api_message(exc.message)}"[:300]
                )
        return None

    def _pending_why(self, status: ClaimStatus) -> ClaimStatus:
        if (
            status.phase == "Pending"
            and self.client.get(paths.storage_class(self.owner.storage_class)) is None
        ):
            return ClaimStatus("Pending", f"no StorageClass {self.owner.storage_class} in the cluster")
        return status
