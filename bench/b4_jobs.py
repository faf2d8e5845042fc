"""B4's second reference: what Kubernetes alone charges for the portal's way of running a job.

The architecture asks for one batch/v1 Job per portal job, created suspended in the project's
namespace (a ResourceQuota, a LimitRange, Pod Security "restricted") and un-suspended by admission
(docs/architecture.md). Here nothing of the portal runs: each client thread POSTs the very manifest
the portal's builder renders, then PATCHes `suspend: false` as admission does, and the Job controller,
the quota and the scheduler do the rest. Its throughput is the ceiling of any portal built that way on
this machine; bare pods (`Direct`) are the benchmark's goal line. The two side by side split B4's gap
into what Kubernetes does for a Job and what the portal adds.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kubernetes.client import ApiClient

from bench.common import Profile, Result, log, percentile
from deploy.localcluster import kube

Obj = dict[str, Any]
JOBS_SLUG = "b4-jobs"  # a project slug no seeded project uses: its namespace is this side's own
PROJECT_ID = 999_999  # only the pods' POSIX ids derive from it


class Measured(Protocol):
    @property
    def rate(self) -> float: ...

    latencies: list[float]


def job_rows(
    profile: Profile, label: str, where: str, ours: Measured, direct: Measured, jobs: Measured
) -> list[Result]:
    """Where the gap lies: Kubernetes alone running the portal's suspended Jobs against bare pods, and
    the portal against that ceiling. Informational: the goal stays bare pods."""
    backend = (
        f"the second reference, Kubernetes Jobs alone on the same {where}: the portal's Job manifests "
        "POSTed suspended and un-suspended at once, in a namespace with its quota, limits and Pod "
        "Security; no portal process"
    )
    p99 = percentile(jobs.latencies, 99) * 1000
    log(f"B4: Kubernetes Jobs alone {jobs.rate:.1f} jobs/s, p99 {p99:.0f} ms")
    rows = [
        ("k8s_jobs_alone_jobs_per_s_vs_direct", jobs.rate, direct.rate),
        ("throughput_jobs_per_s_vs_k8s_jobs_alone", ours.rate, jobs.rate),
        ("submit_to_running_p99_ms_vs_k8s_jobs_alone", percentile(ours.latencies, 99) * 1000, p99),
    ]
    return [Result("B4", profile, backend, m, a, b, "informational", True, label) for m, a, b in rows]


class KubeJobs:
    """Suspended Jobs from the portal's builder, un-suspended at once, in a namespace made by the
    portal's builders with a quota as large as the cluster."""

    def __init__(
        self, api: ApiClient, image: str, gpus: int, cpu_m: int, memory_mi: int, hold_s: int
    ) -> None:
        from accounts.models import Project, Quota
        from workloads.k8s import builders
        from workloads.spec import JobSpec, Simulation

        self.api = api
        self.project = Project(id=PROJECT_ID, slug=JOBS_SLUG, name="B4 Jobs reference")
        hold = Simulation(run_seconds=hold_s)
        self.spec = JobSpec(image=image, gpus=1, cpu_millicores=cpu_m, memory_mib=memory_mi, simulate=hold)
        quota = Quota(
            project=self.project,
            gpus=gpus,
            cpu_millicores=2 * gpus * cpu_m,
            memory_mib=2 * gpus * memory_mi,
            max_concurrent_jobs=gpus,
        )
        namespace = builders.build_namespace(self.project)
        self.namespace = str(namespace["metadata"]["name"])
        kube.create(api, "/api/v1/namespaces", namespace)
        kube.wait_default_service_account(api, self.namespace)
        base = f"/api/v1/namespaces/{self.namespace}"
        kube.create(api, f"{base}/resourcequotas", builders.build_resource_quota(self.project, quota))
        kube.create(api, f"{base}/limitranges", builders.build_limit_range(self.project))
        kube.create(
            api,
            f"/apis/networking.k8s.io/v1/namespaces/{self.namespace}/networkpolicies",
            builders.build_network_policy(self.project),
        )
        self.jobs = f"/apis/batch/v1/namespaces/{self.namespace}/jobs"

    def manifest(self) -> tuple[str, Obj]:
        from workloads.k8s import builders
        from workloads.models import Job

        ids = builders.job_identity(Job(project=self.project, uid=uuid.uuid4()))
        return str(ids.uid), builders.build_job(self.spec, ids, simulation=True)

    def submit(self, client: int, index: int) -> str:
        uid, body = self.manifest()
        if not kube.create(self.api, self.jobs, body):
            raise RuntimeError(f"job {uid} already exists")
        name = body["metadata"]["name"]
        kube.call(
            self.api,
            "PATCH",
            f"{self.jobs}/{name}",
            {"spec": {"suspend": False}},
            content_type="application/merge-patch+json",
        )
        return uid

    def end(self, client: int, keys: list[str]) -> None:
        for uid in keys:  # the pods go with their Job (the garbage collector, in the background)
            kube.delete(self.api, f"{self.jobs}/job-{uid}", query={"propagationPolicy": "Background"})

    def settle(self) -> None:
        """Nothing: the wave's pods are gone, and a deleted Job leaves no work of ours behind."""

    def close(self) -> None:
        kube.delete(self.api, f"/api/v1/namespaces/{self.namespace}")
