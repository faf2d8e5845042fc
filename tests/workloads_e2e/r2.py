"""R2, the one check every drill ends with: every portal job against the cluster's own objects.

- a live portal job has exactly one Kubernetes Job carrying its UID label, in any namespace, whatever
  it is called (names derive from the UID, so a name-keyed check could never see a second one);
- a cancelled or lost job has none left;
- the drill's namespaces hold no labelled Job the portal does not know (no orphans);
- the state the portal shows is the state the cluster's Job and pods say (`observe`).
"""

from __future__ import annotations

import itertools
from typing import Any

from workloads.choices import EventKind, JobState
from workloads.k8s.client import RealKubeClient
from workloads.k8s.status import observe
from workloads.models import Job, JobEvent

UID_LABEL = "gpuportal.dev/job-uid"
GONE_FROM_CLUSTER = (JobState.CANCELLED, JobState.LOST)


def _labelled(kube: RealKubeClient, path: str, uid: str) -> list[dict[str, Any]]:
    return list((kube.get(path, {"labelSelector": f"{UID_LABEL}={uid}"}) or {}).get("items") or [])


def assert_portal_matches_cluster(kube: RealKubeClient) -> None:
    """Fails with the job's UID and what differs; the portal's rows are the whole set to check."""
    rows = {str(job.uid): job for job in Job.objects.select_related("project")}
    namespaces = {job.namespace for job in rows.values()}
    for ns in namespaces:
        jobs = (kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs") or {}).get("items") or []
        orphans = {o["metadata"].get("labels", {}).get(UID_LABEL) for o in jobs} - set(rows)
        assert not orphans, f"orphan Jobs in {ns}: {orphans}"
    for uid, job in rows.items():
        found = _labelled(kube, "/apis/batch/v1/jobs", uid)
        want = 0 if job.state in GONE_FROM_CLUSTER else 1
        assert len(found) == want, f"{uid} ({job.state}): {len(found)} cluster Jobs, want {want}"
        if not found:
            continue
        pods = _labelled(kube, f"/api/v1/namespaces/{job.namespace}/pods", uid)
        seen = observe(found[0], pods)
        assert seen.state == job.state, f"{uid}: portal {job.state}, cluster {seen.state}"


def assert_timelines_whole() -> None:
    """Nothing half-written: each job's transition events chain from its submission (queued) to the
    state its row shows, so no move was committed without its event or the other way round."""
    chains: dict[int, list[tuple[str, str]]] = {}
    # By insertion: a move's event is written after its compare-and-swap, inside its transaction.
    events = JobEvent.objects.filter(kind=EventKind.TRANSITION).order_by("job_id", "pk")
    for job_id, old, new in events.values_list("job_id", "from_state", "to_state"):
        chains.setdefault(job_id, []).append((old, new))
    for job_id, uid, state in Job.objects.values_list("pk", "uid", "state"):
        chain = chains.get(job_id, [])
        assert chain, f"{uid}: no timeline"
        assert chain[0] == ("", JobState.QUEUED), f"{uid}: timeline starts {chain[0]}"
        for (_, new), (old, _) in itertools.pairwise(chain):
            assert old == new, f"{uid}: timeline breaks {chain}"
        assert chain[-1][1] == state, f"{uid}: row {state}, timeline ends {chain[-1][1]}"
