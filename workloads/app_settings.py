"""Workload tunables, read lazily from django.conf.settings so tests can override them. Each is
declared, with its default, in portal/settings/environment.py."""

from __future__ import annotations

from typing import Literal

from django.conf import settings

# A site's switches for its tests and demo, each a setting below; spec fields name the one that
# shows them (workloads/spec/declaration.py: Hints.tests_and_demo).
SiteSwitch = Literal["simulation", "real_node"]


def log_tail_bytes() -> int:
    """How much of a finished job's log the portal keeps (the end of it)."""
    return int(settings.GPUPORTAL_JOB_LOG_TAIL_BYTES)


def simulation() -> bool:
    """Copy the kwok demo/test annotations (run time, exit code) into pods. Never in production."""
    return bool(settings.GPUPORTAL_JOB_SIMULATION)


def real_node_placement() -> bool:
    """Jobs may ask for the local cluster's real node (deploy/localcluster/README.md). Never in production."""
    return bool(settings.GPUPORTAL_REAL_NODE_PLACEMENT)


def site_switches() -> frozenset[SiteSwitch]:
    """The tests-and-demo switches this site has on."""
    on: dict[SiteSwitch, bool] = {"simulation": simulation(), "real_node": real_node_placement()}
    return frozenset(name for name, value in on.items() if value)


def ttl_after_finished_s() -> int:
    """`ttlSecondsAfterFinished` of every Job: Kubernetes' TTL controller removes a finished Job and
    its pod this long after the end; the portal has kept the outcome, log tail and events by then."""
    return int(settings.GPUPORTAL_JOB_TTL_SECONDS)


def backoff_limit() -> int:
    return int(settings.GPUPORTAL_JOB_BACKOFF_LIMIT)


def max_gpus_per_job() -> int:
    return int(settings.GPUPORTAL_MAX_GPUS_PER_JOB)


def max_workers_per_job() -> int:
    return int(settings.GPUPORTAL_MAX_WORKERS_PER_JOB)


def mps_slices_per_gpu() -> int:
    return int(settings.GPUPORTAL_MPS_SLICES_PER_GPU)


def namespace_max_jobs() -> int:
    """`count/jobs.batch` of every tenant ResourceQuota: each queued job is a suspended Kubernetes Job
    and a finished one stays until its TTL, so this bounds what one namespace can put in etcd. Keep it
    above the queued-jobs cap plus the running jobs plus the jobs a project finishes within the TTL."""
    return int(settings.GPUPORTAL_NAMESPACE_MAX_JOBS)


def outbox_retry_s() -> float:
    """A pending outbox row is published again after this long without progress."""
    return float(settings.GPUPORTAL_OUTBOX_RETRY_SECONDS)


def reconcile_expires_s() -> float:
    """A queued job reconcile older than this is dropped unrun: four sweep intervals, at least 60 s."""
    configured = settings.GPUPORTAL_RECONCILE_EXPIRES_SECONDS
    if configured is not None:
        return float(configured)
    return max(60.0, 4 * float(settings.GPUPORTAL_SWEEP_SECONDS))


def job_no_pod_s() -> float:
    """A running job whose Kubernetes Job shows no pod and no outcome this long becomes unknown."""
    return float(settings.GPUPORTAL_JOB_NO_POD_SECONDS)


def job_unknown_s() -> float:
    """An unknown job without evidence this long is declared lost: twenty default sweeps, so a
    relist or a restarted API server has many chances to bring the evidence back first."""
    return float(settings.GPUPORTAL_JOB_UNKNOWN_SECONDS)


def project_posix_id(project_pk: int) -> int:
    """The UID and GID every pod of one project runs as: the base plus the project's id, so no two
    projects share one (MPS runs one server per UID; /dev/shm and volume files are owned by it)."""
    return int(settings.GPUPORTAL_PROJECT_UID_BASE) + project_pk


def lease_namespace() -> str:
    return str(settings.GPUPORTAL_LEASE_NAMESPACE)


def tenant_role_bindings() -> dict[str, list[tuple[str, str]]]:
    """ClusterRole -> the ServiceAccounts ("namespace", "name") bound to it in every tenant namespace.
    Empty (the demo, the tests' admin kubeconfig): no RoleBindings are made."""
    raw: dict[str, list[str]] = settings.GPUPORTAL_TENANT_ROLE_BINDINGS  # parsed and checked as it is read
    return {str(role): [_service_account(s) for s in subjects] for role, subjects in raw.items()}


def _service_account(ref: object) -> tuple[str, str]:
    namespace, _, name = str(ref).partition(":")
    return namespace, name


def provisioner_queue() -> str:
    """The Celery queue of the separate namespace-provisioner worker; empty when this process
    writes namespaces itself (the demo, the tests)."""
    return str(settings.GPUPORTAL_PROVISIONER_QUEUE)


def namespace_prefix() -> str:
    return str(settings.GPUPORTAL_NAMESPACE_PREFIX)


def is_portal_namespace(namespace: str) -> bool:
    """One of this portal's project namespaces (another portal on the cluster has another prefix)."""
    return namespace.startswith(namespace_prefix())


def log_follow_idle_s() -> float:
    """A followed log with no new output for this long ends (the page or `gpuctl logs -f` reconnects)."""
    return float(settings.GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS)


def log_follow_poll_s() -> float:
    """How often a followed log without output re-reads its job (started yet? ended?)."""
    return float(settings.GPUPORTAL_LOG_FOLLOW_POLL_SECONDS)


def log_streams_per_user() -> int:
    """Followed log streams one user may hold open in one web process."""
    return int(settings.GPUPORTAL_LOG_STREAMS_PER_USER)


def busy_sm_pct() -> int:
    """A GPU sample counts as busy (used GPU-hours) when its SM utilisation is at least this (%)."""
    return int(settings.GPUPORTAL_BUSY_SM_PERCENT)


def oversized_mem_pct() -> int:
    """A finished job is listed as oversized when its peak GPU memory is under this share (%) of
    what it asked for, and its peak SM utilisation under `oversized_sm_pct`."""
    return int(settings.GPUPORTAL_OVERSIZED_MEM_PERCENT)


def oversized_sm_pct() -> int:
    return int(settings.GPUPORTAL_OVERSIZED_SM_PERCENT)


def rightsizing_min_minutes() -> int:
    """Runs shorter than this give no right-sizing hint: a start-up peak is not a workload."""
    return int(settings.GPUPORTAL_RIGHTSIZING_MIN_MINUTES)


def rightsizing_headroom_pct() -> int:
    """Room kept above the peaks when a smaller size is suggested (%)."""
    return int(settings.GPUPORTAL_RIGHTSIZING_HEADROOM_PERCENT)
