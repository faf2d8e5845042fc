"""The admission cycle: live cluster read, then plan and apply under the admission lock.

The policy is `workloads.queue.plan_cycle` (pure); this module feeds it the database
(`admission.state`) and the live cluster (`admission.live`) and applies its plan through the
queue services (`workloads.services.queue`) under a Postgres advisory lock, so two passes
(controller and sweep, or two controllers during a hand-over) never admit against the same
headroom. The namespace's ResourceQuota is the backstop the API server enforces.

Steps of `admission_cycle()` (each write is a compare-and-swap, so a second runner is harmless):

1. Read the live nodes and pods from the cluster, outside any transaction (no lock is ever held
   across a Kubernetes call), or take them from the controller's watch-fed copy when it gives one.
2. In one transaction under the Postgres advisory lock: requeue preempted jobs whose pods are gone,
   build the `ClusterState`, call `plan_cycle`.
3. Withdraw notices no longer needed; store new notices (deadline) and notify the owners.
4. Preempt victims whose notice ended: admitted/running -> preempted. The reconciler re-suspends
   the Kubernetes Job; once its pods are gone a later cycle puts it back as queued, front.
5. Admit: queued -> admitted with the planned node (each worker's, for a job of several) and the
   borrowing flag; the job's outbox row makes
   the reconciler un-suspend the Kubernetes Job after commit.
6. Store each pending job's explanation and position; push the changed ones to the job pages. Mark
   the nodes held for a waiting job of several workers (the node tiles say so).
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from workloads.admission.live import LiveCluster, live_cluster
from workloads.admission.state import cluster_state
from workloads.k8s.client import KubeClient, get_client
from workloads.queue import plan_cycle
from workloads.services import broadcast
from workloads.services.queue import (
    explanations_store,
    job_admit,
    job_preempt,
    nodes_held,
    notices_apply,
    requeue_preempted,
)

ADMISSION_LOCK = 0x6770_7061  # "gppa"


def _lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION_LOCK])


def admission_cycle(
    *, client: KubeClient | None = None, now: datetime | None = None, live: LiveCluster | None = None
) -> list[int]:
    """Admit what fits now, preempt what the notices allow, store explanations; returns the ids admitted.
    `live`: the cluster as the caller already holds it; read from the API server when None."""
    if live is None:
        live = live_cluster(client or get_client())
    changed: list[int] = []
    with transaction.atomic():
        _lock()
        now = now or timezone.now()
        requeue_preempted(bound=live.job_uids())
        plan = plan_cycle(cluster_state(now=now, live=live), now)
        notices_apply(plan=plan, now=now)
        for job_id in plan.preempt:
            job_preempt(job_id=job_id)
        admitted = [
            a.job_id
            for a in plan.admit
            if job_admit(job_id=a.job_id, node=a.node, borrowing=a.borrowing, worker_nodes=a.nodes)
        ]
        changed = explanations_store(explanations=plan.explanations.values())
        nodes_held(held=plan.held)
    broadcast.jobs_changed(changed)
    return admitted
