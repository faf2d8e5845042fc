"""Which gated workers of a job of several to release, and where. Pure.

The Job controller makes all of a job's pods at once, each behind `builders.WORKER_GATE`; the
scheduler does not see a gated pod. Only once every worker's pod exists are they pinned to their
planned nodes and released, all in the same pass, so no worker holds a GPU while another waits for a
place it may never get. A job's pods being replaced (a resume after preemption) are released again
the same way, once all of them are there.
"""

from __future__ import annotations

from typing import Any

from workloads.k8s.builders import WORKER_GATE
from workloads.k8s.labels import worker_index

Obj = dict[str, Any]


def _gated(pod: Obj) -> bool:
    return any(g.get("name") == WORKER_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def _live(pod: Obj) -> bool:
    meta, phase = pod.get("metadata") or {}, (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def workers_to_release(pods: list[Obj], planned: list[str], workers: int) -> list[tuple[str, str]]:
    """(pod name, planned node) for each gated worker, when every worker index has a live pod and a
    planned node; [] while any is missing (the next pod event brings the job back)."""
    live = [p for p in pods if _live(p)]
    indices = {worker_index(p) for p in live}
    if len(planned) != workers or not set(range(workers)) <= indices:
        return []
    out = []
    for pod in live:
        index = worker_index(pod)
        if _gated(pod) and index is not None and index < workers:
            out.append((str(pod["metadata"]["name"]), planned[index]))
    return sorted(out)
