"""The reconciler shape (authentik's KubernetesObjectReconciler): desired, current, compare, act.

`up()` converges one object: create when missing (409 AlreadyExists counts as done), update when
`reconcile()` raises NeedsUpdate, delete + create on NeedsRecreate. `down()` deletes, treating
404 as done. Subclasses stay small and pure apart from their client calls.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from workloads.k8s.client import KubeClient

T = TypeVar("T")
Obj = dict[str, Any]


class NeedsUpdate(Exception):
    """The object exists but differs in fields that can be patched."""


class NeedsRecreate(Exception):
    """The object differs in an immutable field."""


class Reconciler(Generic[T]):
    kind = "object"

    def __init__(self, owner: T, client: KubeClient) -> None:
        self.owner = owner
        self.client = client

    @property
    def path(self) -> str:
        raise NotImplementedError

    @property
    def collection(self) -> str:
        raise NotImplementedError

    def desired(self) -> Obj:
        raise NotImplementedError

    def current(self) -> Obj | None:
        return self.client.get(self.path)

    def reconcile(self, current: Obj, desired: Obj) -> None:
        """Raise NeedsUpdate or NeedsRecreate when current does not match desired."""

    def create(self, desired: Obj) -> Obj | None:
        return self.client.create(self.collection, desired)

    def update(self, current: Obj, desired: Obj) -> Obj:
        return self.client.patch(self.path, desired, apply=True)

    def delete(self) -> bool:
        return self.client.delete(self.path, propagation="Background")

    def up(self) -> Obj | None:
        desired = self.desired()
        current = self.current()
        if current is None:
            return self.create(desired) or self.current()
        try:
            self.reconcile(current, desired)
        except NeedsUpdate:
            return self.update(current, desired)
        except NeedsRecreate:
            self.delete()
            return self.create(desired)
        return current

    def down(self) -> bool:
        return self.delete()
