"""The admission pass the controller (and the sweep) call: the fair-share queue of issue 5.

The policy is `workloads.queue.plan_cycle` (pure); `workloads.queue_service.admission_cycle` feeds
it the database and the live cluster and applies its plan with compare-and-swap transitions under a
Postgres advisory lock, so two passes (controller and sweep, or two controllers during a hand-over)
never admit against the same headroom. Admitting is only a state change; the job's reconcile then
un-suspends the Kubernetes Job. The namespace's ResourceQuota is the backstop the API server enforces.
"""

from __future__ import annotations

from workloads.k8s.client import KubeClient
from workloads.queue_service import ADMISSION_LOCK, admission_cycle

__all__ = ["ADMISSION_LOCK", "admission_pass"]


def admission_pass(client: KubeClient | None = None) -> list[int]:
    """Admit what fits now, preempt what the notices allow, store explanations; returns ids admitted."""
    return admission_cycle(client=client)
