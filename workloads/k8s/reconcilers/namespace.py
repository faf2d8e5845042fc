"""A project's namespace and its guard rails, in a fixed order (namespace first).

Objects are written with server-side apply under the portal's field manager, so a reconcile is
idempotent and an operator's quota change in the admin simply re-applies the ResourceQuota. The
reconcilers read no rows: the caller hands them a `Tenant` with the quota already worked out.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from accounts.models import Project, Quota
from workloads import app_settings
from workloads.k8s import builders, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.quantity import value
from workloads.k8s.reconcilers.base import NeedsRecreate, NeedsUpdate, Obj, Reconciler


@dataclass(frozen=True)
class Tenant:
    """What a project's namespace objects are built from. `extra_*`: GPUs and slices above the base
    quota that admission may have let through (active grants, admitted borrowing jobs)."""

    project: Project
    quota: Quota
    extra_gpus: int = 0
    extra_slices: int = 0


def _subset(want: Obj, have: Obj) -> bool:
    return all(
        have.get(k) == v if not isinstance(v, dict) else _subset(v, have.get(k) or {})
        for k, v in want.items()
    )


class _Applied(Reconciler[Tenant]):
    def reconcile(self, current: Obj, desired: Obj) -> None:
        want = {"metadata": {"labels": desired["metadata"].get("labels", {})}}
        want.update({k: v for k, v in desired.items() if k in ("spec",)})
        if not _subset(want, current):
            raise NeedsUpdate

    def create(self, desired: Obj) -> Obj | None:
        return self.client.patch(self.path, desired, apply=True)


class NamespaceReconciler(_Applied):
    kind = "Namespace"

    @property
    def path(self) -> str:
        return paths.namespace(self.owner.project.namespace)

    def desired(self) -> Obj:
        return builders.build_namespace(self.owner.project)


class ResourceQuotaReconciler(_Applied):
    kind = "ResourceQuota"

    @property
    def path(self) -> str:
        return paths.resource_quota(self.owner.project.namespace, "portal-quota")

    def desired(self) -> Obj:
        t = self.owner
        return builders.build_resource_quota(
            t.project, t.quota, extra_gpus=t.extra_gpus, extra_slices=t.extra_slices
        )

    def reconcile(self, current: Obj, desired: Obj) -> None:
        # Compared as numbers: the stored "10k" and "16" are the "10000" and "16000m" asked for.
        if _amounts((current.get("spec") or {}).get("hard") or {}) != _amounts(desired["spec"]["hard"]):
            raise NeedsUpdate


def _amounts(hard: dict[str, Any]) -> dict[str, Decimal]:
    return {name: value(amount) for name, amount in hard.items()}


class LimitRangeReconciler(_Applied):
    kind = "LimitRange"

    @property
    def path(self) -> str:
        return paths.limit_range(self.owner.project.namespace, "portal-limits")

    def desired(self) -> Obj:
        return builders.build_limit_range(self.owner.project)


class NetworkPolicyReconciler(_Applied):
    kind = "NetworkPolicy"

    @property
    def path(self) -> str:
        return paths.network_policy(self.owner.project.namespace, "default-deny")

    def desired(self) -> Obj:
        return builders.build_network_policy(self.owner.project)


class RoleBindingReconciler(_Applied):
    """One tenant RoleBinding (roleRef is immutable: a changed role means recreate)."""

    kind = "RoleBinding"

    def __init__(self, owner: Tenant, client: KubeClient, desired: Obj) -> None:
        super().__init__(owner, client)
        self._desired = desired

    @property
    def path(self) -> str:
        return paths.role_binding(self.owner.project.namespace, self._desired["metadata"]["name"])

    def desired(self) -> Obj:
        return self._desired

    def reconcile(self, current: Obj, desired: Obj) -> None:
        if current.get("roleRef") != desired["roleRef"]:
            raise NeedsRecreate
        if current.get("subjects") != desired["subjects"]:
            raise NeedsUpdate


RECONCILE_ORDER: tuple[type[_Applied], ...] = (
    NamespaceReconciler,
    ResourceQuotaReconciler,
    LimitRangeReconciler,
    NetworkPolicyReconciler,
)


def reconcile_namespace(tenant: Tenant, client: KubeClient) -> list[str]:
    """Converge every object of the project's namespace; returns the kinds it touched."""
    touched = [cls.kind for cls in RECONCILE_ORDER if cls(tenant, client).up() is not None]
    bindings = builders.build_tenant_role_bindings(tenant.project, app_settings.tenant_role_bindings())
    for desired in bindings:
        if RoleBindingReconciler(tenant, client, desired).up() is not None:
            touched.append(RoleBindingReconciler.kind)
    return touched


def reconcile_quota(tenant: Tenant, client: KubeClient) -> None:
    """Converge the ResourceQuota alone (a grant or a borrowing job changed)."""
    ResourceQuotaReconciler(tenant, client).up()
