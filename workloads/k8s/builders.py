"""Pure builders: portal rows in, Kubernetes manifests (plain dicts) out. Tested by dict equality.

The job manifest is rendered from a fixed, Pod Security "restricted" base; only typed, validated
fields of the Job row are copied in. Nothing a user sends reaches a pod-security, scheduling,
identity or volume-source field.
"""

from __future__ import annotations

from typing import Any

from accounts.models import Project, Quota
from plugin.names import GPU_PRODUCT_LABEL, GPU_RESOURCE, MANAGER, REAL_NODE_LABEL, SHARED_RESOURCE
from workloads import app_settings
from workloads.choices import Placement
from workloads.k8s.labels import MANAGED_BY, PROJECT_LABEL, managed, object_meta
from workloads.k8s.labels import UID_LABEL as UID_LABEL  # builders' users read the label here too
from workloads.models import Job, ProjectVolume

GPU = GPU_RESOURCE
GPU_SHARED = SHARED_RESOURCE
GPU_PRODUCT = GPU_PRODUCT_LABEL
SIM_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
SIM_EXIT_CODE = "gpuportal.dev/exit-code"
JSON = dict[str, Any]


def job_labels(job: Job) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, UID_LABEL: str(job.uid), PROJECT_LABEL: job.project.slug}


def _resources(job: Job) -> JSON:
    """Requests equal limits (Guaranteed QoS), so no LimitRange default can undercut a request."""
    requests = {"cpu": f"{job.cpu_millicores}m", "memory": f"{job.memory_mib}Mi"}
    if job.gpus:
        requests[GPU] = str(job.gpus)
    elif job.mps_slices:
        requests[GPU_SHARED] = str(job.mps_slices)
    return {"requests": requests, "limits": dict(requests)}


def _container_security() -> JSON:
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _pod_security(job: Job) -> JSON:
    uid = app_settings.project_posix_id(job.project_id)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _volumes(job: Job, claims: dict[str, ProjectVolume]) -> tuple[list[JSON], list[JSON]]:
    volumes, mounts = [], []
    for index, item in enumerate(job.volumes):
        claim = claims[item["volume"]]
        name = f"vol-{index}"
        read_only = bool(item.get("read_only")) or claim.read_only
        volumes.append(
            {"name": name, "persistentVolumeClaim": {"claimName": claim.claim_name, "readOnly": read_only}}
        )
        mounts.append({"name": name, "mountPath": item["mount_path"], "readOnly": read_only})
    return volumes, mounts


def _container(job: Job, mounts: list[JSON]) -> JSON:
    container: JSON = {
        "name": "main",
        "image": job.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(job),
        "securityContext": _container_security(),
        "env": [{"name": e["name"], "value": e["value"]} for e in job.env],
    }
    if job.command:
        container["command"] = list(job.command)
    if job.args:
        container["args"] = list(job.args)
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _pod_annotations(job: Job, simulation: bool) -> dict[str, str]:
    if not simulation:
        return {}
    out: dict[str, str] = {}
    if job.sim_run_seconds is not None:
        out[SIM_DELAY] = f"{job.sim_run_seconds}s"
    if job.sim_exit_code is not None and job.sim_exit_code != 0:
        out[SIM_EXIT_CODE] = str(job.sim_exit_code)
    return out


def _pod_spec(job: Job, claims: dict[str, ProjectVolume]) -> JSON:
    volumes, mounts = _volumes(job, claims)
    spec: JSON = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _pod_security(job),
        "containers": [_container(job, mounts)],
    }
    if volumes:
        spec["volumes"] = volumes
    if job.gpu_type and job.gpus:
        spec["nodeSelector"] = {GPU_PRODUCT: job.gpu_type}
    if job.placement == Placement.REAL_NODE:
        # The local cluster's real node: its label, and its taint, which keeps every other pod off.
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), REAL_NODE_LABEL: "true"}
        spec["tolerations"] = [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]
    affinity = pod_affinity(job)
    if affinity is not None:
        spec["affinity"] = affinity
    return spec


def pod_affinity(job: Job) -> JSON | None:
    """An MPS job runs on the node the queue chose: that node's shared GPUs hold its project only
    (workloads/queue/capacity.py), which the default scheduler alone would not respect."""
    if not (job.mps_slices and job.planned_node):
        return None
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [job.planned_node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def build_job(
    job: Job,
    *,
    claims: dict[str, ProjectVolume] | None = None,
    simulation: bool | None = None,
    suspended: bool = True,
) -> JSON:
    """The batch/v1 Job for a portal job: suspended until admission un-suspends it. `suspended=False`
    only for a job admitted before its Job was made: the same end state without the round trip."""
    sim = app_settings.simulation() if simulation is None else simulation
    labels = job_labels(job)
    template_meta: JSON = {"labels": dict(labels)}
    annotations = _pod_annotations(job, sim)
    if annotations:
        template_meta["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.k8s_name, "namespace": job.namespace, "labels": labels},
        "spec": {
            "suspend": suspended,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": app_settings.backoff_limit(),
            "podReplacementPolicy": "Failed",
            "activeDeadlineSeconds": job.max_runtime_minutes * 60,
            "ttlSecondsAfterFinished": app_settings.ttl_after_finished_s(),
            "template": {"metadata": template_meta, "spec": _pod_spec(job, claims or {})},
        },
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
        "pods": str(quota.max_concurrent_jobs),
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
