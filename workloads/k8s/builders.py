"""Pure builders: a job's spec and identity, or portal rows, in; Kubernetes manifests (plain dicts)
out. Tested by dict equality.

The job manifest is rendered from a fixed, Pod Security "restricted" base; only typed, validated
fields of the job's spec (workloads.spec.JobSpec) are copied in. Nothing a user sends reaches a
pod-security, scheduling, identity or volume-source field.
"""

from __future__ import annotations

from accounts.models import Project, Quota
from plugin.names import GPU_PRODUCT_LABEL, GPU_RESOURCE, REAL_NODE_LABEL, SHARED_RESOURCE
from workloads import app_settings
from workloads.choices import Placement

# Builders' users read these here too: a job's identity and the objects beside a job of several workers.
from workloads.k8s.identity import JSON as JSON
from workloads.k8s.identity import JobIdentity as JobIdentity
from workloads.k8s.identity import job_identity as job_identity
from workloads.k8s.identity import job_labels as job_labels
from workloads.k8s.labels import PROJECT_LABEL, managed, object_meta
from workloads.k8s.labels import UID_LABEL as UID_LABEL
from workloads.k8s.worker_objects import MASTER_PORT as MASTER_PORT
from workloads.k8s.worker_objects import MPI_DIR as MPI_DIR
from workloads.k8s.worker_objects import WORKER_GATE as WORKER_GATE
from workloads.k8s.worker_objects import build_worker_policy as build_worker_policy
from workloads.k8s.worker_objects import build_worker_service as build_worker_service
from workloads.k8s.worker_objects import build_worker_ssh as build_worker_ssh
from workloads.k8s.worker_objects import launch_env
from workloads.k8s.worker_objects import node_pin as node_pin
from workloads.k8s.worker_objects import worker_host as worker_host
from workloads.k8s.worker_objects import worker_release as worker_release
from workloads.k8s.worker_objects import worker_ssh_volume as worker_ssh_volume
from workloads.models import ProjectVolume
from workloads.spec import JobSpec

GPU = GPU_RESOURCE
GPU_SHARED = SHARED_RESOURCE
GPU_PRODUCT = GPU_PRODUCT_LABEL
SIM_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
SIM_EXIT_CODE = "gpuportal.dev/exit-code"


def _resources(spec: JobSpec) -> JSON:
    """Requests equal limits (Guaranteed QoS), so no LimitRange default can undercut a request."""
    requests = {"cpu": f"{spec.cpu_millicores}m", "memory": f"{spec.memory_mib}Mi"}
    if spec.gpus:
        requests[GPU] = str(spec.gpus)
    elif spec.mps_slices:
        requests[GPU_SHARED] = str(spec.mps_slices)
    return {"requests": requests, "limits": dict(requests)}


def _container_security() -> JSON:
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _pod_security(ids: JobIdentity) -> JSON:
    return {
        "runAsNonRoot": True,
        "runAsUser": ids.posix_id,
        "runAsGroup": ids.posix_id,
        "fsGroup": ids.posix_id,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _volumes(spec: JobSpec, claims: dict[str, ProjectVolume]) -> tuple[list[JSON], list[JSON]]:
    volumes, mounts = [], []
    for index, item in enumerate(spec.volumes):
        claim = claims[item.volume]
        name = f"vol-{index}"
        read_only = item.read_only or claim.read_only
        volumes.append(
            {"name": name, "persistentVolumeClaim": {"claimName": claim.claim_name, "readOnly": read_only}}
        )
        mounts.append({"name": name, "mountPath": item.mount_path, "readOnly": read_only})
    return volumes, mounts


def _container(spec: JobSpec, ids: JobIdentity, mounts: list[JSON]) -> JSON:
    env = launch_env(spec, ids) if spec.workers > 1 else []
    container: JSON = {
        "name": "main",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(spec),
        "securityContext": _container_security(),
        "env": env + [{"name": e.name, "value": e.value} for e in spec.env],
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _pod_annotations(spec: JobSpec, simulation: bool) -> dict[str, str]:
    if not simulation or spec.simulate is None:
        return {}
    out: dict[str, str] = {}
    if spec.simulate.run_seconds is not None:
        out[SIM_DELAY] = f"{spec.simulate.run_seconds}s"
    if spec.simulate.exit_code is not None and spec.simulate.exit_code != 0:
        out[SIM_EXIT_CODE] = str(spec.simulate.exit_code)
    return out


def _pod_spec(spec: JobSpec, ids: JobIdentity, claims: dict[str, ProjectVolume]) -> JSON:
    volumes, mounts = _volumes(spec, claims)
    if spec.workers > 1:
        ssh_volume, ssh_mount = worker_ssh_volume(ids)
        volumes.append(ssh_volume)
        mounts.append(ssh_mount)
    pod: JSON = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _pod_security(ids),
        "containers": [_container(spec, ids, mounts)],
    }
    if spec.workers > 1:
        pod["subdomain"] = ids.name
        pod["schedulingGates"] = [{"name": WORKER_GATE}]
    if volumes:
        pod["volumes"] = volumes
    if spec.gpu_type and spec.gpus:
        pod["nodeSelector"] = {GPU_PRODUCT: spec.gpu_type}
    if spec.placement == Placement.REAL_NODE:
        # The local cluster's real node: its label, and its taint, which keeps every other pod off.
        pod["nodeSelector"] = {**pod.get("nodeSelector", {}), REAL_NODE_LABEL: "true"}
        pod["tolerations"] = [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]
    affinity = pod_affinity(spec, ids)
    if affinity is not None:
        pod["affinity"] = affinity
    return pod


def pod_affinity(spec: JobSpec, ids: JobIdentity) -> JSON | None:
    """An MPS job runs on the node the queue chose: that node's shared GPUs hold its project only
    (workloads/queue/capacity.py), which the default scheduler alone would not respect."""
    if not (spec.mps_slices and ids.planned_node):
        return None
    return node_pin(ids.planned_node)


def build_job(
    spec: JobSpec,
    ids: JobIdentity,
    *,
    claims: dict[str, ProjectVolume] | None = None,
    simulation: bool | None = None,
    suspended: bool = True,
) -> JSON:
    """The batch/v1 Job for a portal job: suspended until admission un-suspends it. `suspended=False`
    only for a job admitted before its Job was made: the same end state without the round trip."""
    sim = app_settings.simulation() if simulation is None else simulation
    labels = job_labels(ids)
    template_meta: JSON = {"labels": dict(labels)}
    annotations = _pod_annotations(spec, sim)
    if annotations:
        template_meta["annotations"] = annotations
    job_spec: JSON = {
        "suspend": suspended,
        "parallelism": spec.workers,
        "completions": spec.workers,
        "backoffLimit": app_settings.backoff_limit(),
        "podReplacementPolicy": "Failed",
        "activeDeadlineSeconds": spec.max_runtime_minutes * 60,
        "ttlSecondsAfterFinished": app_settings.ttl_after_finished_s(),
        "template": {"metadata": template_meta, "spec": _pod_spec(spec, ids, claims or {})},
    }
    if spec.workers > 1:
        # One worker retried alone would rejoin a collective the others left: any failure fails the
        # Job, whose controller then stops the other workers.
        job_spec["completionMode"] = "Indexed"
        job_spec["backoffLimit"] = 0
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": ids.name, "namespace": ids.namespace, "labels": labels},
        "spec": job_spec,
    }


def namespace_labels() -> dict[str, str]:
    labels = managed()
    for mode in ("enforce", "warn", "audit"):
        labels[f"pod-security.kubernetes.io/{mode}"] = "restricted"
        labels[f"pod-security.kubernetes.io/{mode}-version"] = "latest"
    return labels


def build_namespace(project: Project) -> JSON:
    labels = {**namespace_labels(), PROJECT_LABEL: project.slug}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": project.namespace, "labels": labels},
    }


def build_resource_quota(
    project: Project, quota: Quota, *, extra_gpus: int = 0, extra_slices: int = 0
) -> JSON:
    """The namespace backstop. `extra_*`: active approved grants plus the project's admitted borrowing
    jobs, so the API server accepts every pod the portal's admission (the real gate) let through."""
    hard = {
        f"requests.{GPU}": str(quota.gpus + extra_gpus),
        f"requests.{GPU_SHARED}": str(quota.mps_slices + extra_slices),
        "requests.cpu": f"{quota.cpu_millicores}m",
        "requests.memory": f"{quota.memory_mib}Mi",
        "limits.memory": f"{quota.memory_mib}Mi",
        # Every worker of a job is a pod; the queue counts the job once.
        "pods": str(quota.max_concurrent_jobs * app_settings.max_workers_per_job()),
        "count/jobs.batch": str(app_settings.namespace_max_jobs()),
    }
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta("portal-quota", project.namespace),
        "spec": {"hard": hard},
    }


def build_limit_range(project: Project) -> JSON:
    limit = {
        "type": "Container",
        "default": {"cpu": "1", "memory": "1Gi"},
        "defaultRequest": {"cpu": "100m", "memory": "256Mi"},
    }
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_meta("portal-limits", project.namespace),
        "spec": {"limits": [limit]},
    }


def build_network_policy(project: Project) -> JSON:
    """Default deny in and out, except DNS to kube-system."""
    dns = {
        "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta("default-deny", project.namespace),
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "egress": [dns]},
    }


def build_tenant_role_bindings(project: Project, bindings: dict[str, list[tuple[str, str]]]) -> list[JSON]:
    """One RoleBinding per tenant ClusterRole, naming the portal's own ServiceAccounts (the chart's
    GPUPORTAL_TENANT_ROLE_BINDINGS): Job writes are granted here, inside the tenant, not cluster-wide."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": object_meta(role, project.namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": name} for ns, name in subjects],
        }
        for role, subjects in sorted(bindings.items())
    ]
