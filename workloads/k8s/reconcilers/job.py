"""One portal job against its Kubernetes Job: compare and call, with the inputs handed to it.

The reconciler reads no rows and writes none. `workloads.services.cluster_sync.job_sync` decides
when to create, (un)suspend or delete, and writes back what the cluster reports.
"""

from __future__ import annotations

import logging

from workloads.choices import JobState
from workloads.k8s import builders, labels, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError
from workloads.k8s.labels import worker_index
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler
from workloads.k8s.sshkeys import new_ssh_key
from workloads.k8s.workers import workers_to_release
from workloads.models import Job, ProjectVolume

log = logging.getLogger(__name__)
# Unknown too: its Job may still be running, so a Job that shows up again is never suspended under it.
RUNS_IN_CLUSTER = frozenset({JobState.ADMITTED, JobState.RUNNING, JobState.UNKNOWN})


class JobReconciler(Reconciler[Job]):
    kind = "Job"

    def __init__(self, owner: Job, client: KubeClient, *, claims: dict[str, ProjectVolume]) -> None:
        super().__init__(owner, client)
        self.claims = claims

    @property
    def path(self) -> str:
        return paths.job(self.owner.namespace, self.owner.k8s_name)

    @property
    def collection(self) -> str:
        return paths.jobs(self.owner.namespace)

    def desired(self) -> Obj:
        spec, ids = self.owner.job_spec(), builders.job_identity(self.owner)
        return builders.build_job(spec, ids, claims=self.claims, suspended=self.want_suspended())

    def want_suspended(self) -> bool:
        return self.owner.state not in RUNS_IN_CLUSTER

    def reconcile(self, current: Obj, desired: Obj) -> None:
        if bool((current.get("spec") or {}).get("suspend")) != self.want_suspended():
            raise NeedsUpdate

    def update(self, current: Obj, desired: Obj) -> Obj:
        """(Un)suspend; on the way in, also pin an MPS job to its planned node (a suspended Job's
        scheduling fields may change). Where the API server refuses that, the plugin still refuses
        slices on a GPU another project holds, so unsuspending alone is safe."""
        suspend = {"suspend": self.want_suspended()}
        affinity = builders.pod_affinity(self.owner.job_spec(), builders.job_identity(self.owner))
        if suspend["suspend"] or affinity is None:
            return self.client.patch(self.path, {"spec": suspend})
        try:
            return self.client.patch(
                self.path, {"spec": {**suspend, "template": {"spec": {"affinity": affinity}}}}
            )
        except K8sError as exc:
            if exc.status != 422:
                raise
            log.warning("job %s: node pin refused (%s); unsuspending without it", self.owner.pk, exc)
            return self.client.patch(self.path, {"spec": suspend})

    def release_workers(self, job: Obj, pods: list[Obj]) -> int:
        """A job of several workers whose pods all exist: make its headless Service, NetworkPolicy and
        SSH Secret (409: there already), then pin each gated worker to its planned node and lift its
        gate. Returns how many were released."""
        owner = self.owner
        release = workers_to_release(pods, owner.planned_nodes, owner.workers)
        if not release:
            return 0
        ids = builders.job_identity(owner)
        key = new_ssh_key(f"{ids.name}@{ids.namespace}")
        for collection, body in (
            (paths.services(owner.namespace), builders.build_worker_service(ids, job)),
            (paths.network_policies(owner.namespace), builders.build_worker_policy(ids, job)),
            (paths.secrets(owner.namespace), builders.build_worker_ssh(owner.job_spec(), ids, job, key)),
        ):
            if self.client.create(collection, body) is None and not self._ours(collection, body):
                # An earlier Job's (the job started again), which the garbage collector is removing
                # with its owner: release once it is gone and this Job's own is made (the sweep).
                return 0
        for name, node in release:
            self.client.patch(paths.pod(owner.namespace, name), builders.worker_release(node))
        return len(release)

    def pods(self) -> list[Obj]:
        selector = f"{labels.UID_LABEL}={self.owner.uid}"
        body = self.client.get(paths.pods(self.owner.namespace), {"labelSelector": selector})
        return list((body or {}).get("items") or [])

    def _ours(self, collection: str, body: Obj) -> bool:
        """The object `body` names exists and is owned by the same Kubernetes Job as `body`."""
        current = self.client.get(f"{collection}/{body['metadata']['name']}") or {}
        owners = (current.get("metadata") or {}).get("ownerReferences") or []
        return [o.get("uid") for o in owners] == [o["uid"] for o in body["metadata"]["ownerReferences"]]

    def worker_pods(self) -> list[tuple[int, str]]:
        """(worker index, pod name) of the newest pod of each worker, worker 0 first."""
        newest: dict[int, Obj] = {}
        for pod in sorted(self.pods(), key=lambda p: str(p["metadata"].get("creationTimestamp") or "")):
            index = worker_index(pod)
            if index is not None:
                newest[index] = pod  # the later made wins
        return [(index, str(newest[index]["metadata"]["name"])) for index in sorted(newest)]

    def pod_log_tail(self, pod: str, limit: int) -> tuple[bytes, bool]:
        """The last `limit` bytes of a pod's main container log (K8sError 400/404: no log)."""
        path = paths.pod_log(self.owner.namespace, pod)
        return self.client.read_tail(path, {"container": "main"}, limit)

    def log_tail(self, limit: int) -> tuple[bytes, bool]:
        """The last `limit` bytes of the main container's log and whether more came before them
        (raises K8sError 400/404 when the pod has no log)."""
        path = paths.pod_log(self.owner.namespace, self.owner.pod_name)
        return self.client.read_tail(path, {"container": "main"}, limit)
