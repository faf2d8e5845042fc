"""A project's namespace and its guard rails, in a fixed order (namespace first).

Objects are written with server-side apply under the portal's field manager, so a reconcile is
idempotent and an operator's quota change in the admin simply re-applies the ResourceQuota.
"""

from __future__ import annotations

from django.db.models import Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import Project, Quota
from workloads.choices import ACTIVE_STATES
from workloads.k8s import builders, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler
from workloads.models import GrantStatus, Job, QuotaGrant


def _subset(want: Obj, have: Obj) -> bool:
    return all(
        have.get(k) == v if not isinstance(v, dict) else _subset(v, have.get(k) or {})
        for k, v in want.items()
    )


class _Applied(Reconciler[Project]):
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
        return paths.namespace(self.owner.namespace)

    def desired(self) -> Obj:
        return builders.build_namespace(self.owner)


def quota_extra(project: Project) -> tuple[int, int]:
    """GPUs and slices above the base quota that admission may have let through: active approved
    grants plus the project's admitted/running borrowing jobs."""
    now = timezone.now()
    grants = QuotaGrant.objects.filter(
        project=project, status=GrantStatus.APPROVED, starts_at__lte=now, until__gt=now
    ).aggregate(g=Coalesce(Sum("gpus"), 0), s=Coalesce(Sum("slices"), 0))
    borrowed = Job.objects.filter(project=project, borrowing=True, state__in=ACTIVE_STATES).aggregate(
        g=Coalesce(Sum("gpus"), 0), s=Coalesce(Sum("mps_slices"), 0)
    )
    return grants["g"] + borrowed["g"], grants["s"] + borrowed["s"]


def reconcile_quota(project: Project, client: KubeClient) -> None:
    """Converge the ResourceQuota alone (a grant or a borrowing job changed)."""
    ResourceQuotaReconciler(project, client).up()


class ResourceQuotaReconciler(_Applied):
    kind = "ResourceQuota"

    @property
    def path(self) -> str:
        return paths.resource_quota(self.owner.namespace, "portal-quota")

    def desired(self) -> Obj:
        quota = Quota.objects.filter(project=self.owner).first() or Quota(project=self.owner)
        extra_gpus, extra_slices = quota_extra(self.owner)
        return builders.build_resource_quota(
            self.owner, quota, extra_gpus=extra_gpus, extra_slices=extra_slices
        )

    def reconcile(self, current: Obj, desired: Obj) -> None:
        if (current.get("spec") or {}).get("hard") != desired["spec"]["hard"]:
            raise NeedsUpdate


class LimitRangeReconciler(_Applied):
    kind = "LimitRange"

    @property
    def path(self) -> str:
        return paths.limit_range(self.owner.namespace, "portal-limits")

    def desired(self) -> Obj:
        return builders.build_limit_range(self.owner)


class NetworkPolicyReconciler(_Applied):
    kind = "NetworkPolicy"

    @property
    def path(self) -> str:
        return paths.network_policy(self.owner.namespace, "default-deny")

    def desired(self) -> Obj:
        return builders.build_network_policy(self.owner)


RECONCILE_ORDER: tuple[type[_Applied], ...] = (
    NamespaceReconciler,
    ResourceQuotaReconciler,
    LimitRangeReconciler,
    NetworkPolicyReconciler,
)


def reconcile_namespace(project: Project, client: KubeClient) -> list[str]:
    """Converge every object of the project's namespace; returns the kinds it touched."""
    return [cls.kind for cls in RECONCILE_ORDER if cls(project, client).up() is not None]
