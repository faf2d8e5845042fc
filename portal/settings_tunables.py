"""The portal's own tunables (Kubernetes, GPU jobs, telemetry, Celery routes and schedule), read from
the environment. portal/settings.py star-imports this module; the apps read these lazily through
<app>/app_settings.py. Split from settings.py so each stays short.
"""

from __future__ import annotations

import json

import environ
from django.core.exceptions import ImproperlyConfigured

from plugin.names import SHARING_CONFIG_NAMESPACE

env = environ.Env()

# Portal tunables (read lazily through <app>/app_settings.py).
GPUPORTAL_KUBECONFIG = env.str("GPUPORTAL_KUBECONFIG", default="")
GPUPORTAL_NAMESPACE_PREFIX = env.str("GPUPORTAL_NAMESPACE_PREFIX", default="gp-")


def _tenant_role_bindings() -> dict[str, list[str]]:
    """GPUPORTAL_TENANT_ROLE_BINDINGS: JSON {"<ClusterRole>": ["<namespace>:<serviceaccount>", ...]}
    (the Helm chart sets it); every tenant namespace gets these RoleBindings."""
    raw = env.str("GPUPORTAL_TENANT_ROLE_BINDINGS", default="") or "{}"
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"GPUPORTAL_TENANT_ROLE_BINDINGS is not JSON: {exc}") from None
    ok = isinstance(parsed, dict) and all(
        isinstance(v, list) and all(isinstance(ref, str) and ref.count(":") == 1 for ref in v)
        for v in parsed.values()
    )
    if not ok:
        raise ImproperlyConfigured(
            'GPUPORTAL_TENANT_ROLE_BINDINGS must look like {"role": ["namespace:serviceaccount", ...]}.'
        )
    return {str(role): list(refs) for role, refs in parsed.items()}


GPUPORTAL_TENANT_ROLE_BINDINGS = _tenant_role_bindings()
# Set in the chart: namespace writes go to a worker that runs as the provisioner identity.
GPUPORTAL_PROVISIONER_QUEUE = env.str("GPUPORTAL_PROVISIONER_QUEUE", default="")

# GPU jobs (workloads/app_settings.py reads these lazily).
# Project pods run as UID = GID = this base + the project's id (docs/operator-guide.md, Security).
GPUPORTAL_PROJECT_UID_BASE = env.int("GPUPORTAL_PROJECT_UID_BASE", default=100_000)
GPUPORTAL_JOB_LOG_TAIL_BYTES = env.int("GPUPORTAL_JOB_LOG_TAIL_BYTES", default=256 * 1024)
# Copies the kwok demo annotations (run time, exit code) into pods: the local cluster only.
GPUPORTAL_JOB_SIMULATION = env.bool("GPUPORTAL_JOB_SIMULATION", default=False)
# Lets jobs ask for the local cluster's optional real node (placement "real-node"): tests and demo only.
GPUPORTAL_REAL_NODE_PLACEMENT = env.bool("GPUPORTAL_REAL_NODE_PLACEMENT", default=False)
GPUPORTAL_JOB_TTL_SECONDS = env.int("GPUPORTAL_JOB_TTL_SECONDS", default=7 * 24 * 3600)
# Followed logs (docs/operator-guide.md documents them; they were read from settings only).
GPUPORTAL_LOG_STREAMS_PER_USER = env.int("GPUPORTAL_LOG_STREAMS_PER_USER", default=8)
GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS = env.float("GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS", default=600.0)
GPUPORTAL_LOG_FOLLOW_POLL_SECONDS = env.float("GPUPORTAL_LOG_FOLLOW_POLL_SECONDS", default=3.0)
GPUPORTAL_LEASE_NAMESPACE = env.str("GPUPORTAL_LEASE_NAMESPACE", default="default")
GPUPORTAL_SWEEP_SECONDS = env.int("GPUPORTAL_SWEEP_SECONDS", default=30)
# A running job whose Kubernetes Job shows no pod and no outcome this long becomes "unknown"; an
# unknown job with no evidence this long is "lost" and gives its quota back (reliability.md R4).
GPUPORTAL_JOB_NO_POD_SECONDS = env.int("GPUPORTAL_JOB_NO_POD_SECONDS", default=120)
GPUPORTAL_JOB_UNKNOWN_SECONDS = env.int("GPUPORTAL_JOB_UNKNOWN_SECONDS", default=600)
# Right-sizing and used GPU-hours (docs/operator-guide.md, "Right-sizing and used GPU-hours").
GPUPORTAL_BUSY_SM_PERCENT = env.int("GPUPORTAL_BUSY_SM_PERCENT", default=5)
GPUPORTAL_OVERSIZED_MEM_PERCENT = env.int("GPUPORTAL_OVERSIZED_MEM_PERCENT", default=25)
GPUPORTAL_OVERSIZED_SM_PERCENT = env.int("GPUPORTAL_OVERSIZED_SM_PERCENT", default=25)
GPUPORTAL_RIGHTSIZING_MIN_MINUTES = env.int("GPUPORTAL_RIGHTSIZING_MIN_MINUTES", default=10)
GPUPORTAL_RIGHTSIZING_HEADROOM_PERCENT = env.int("GPUPORTAL_RIGHTSIZING_HEADROOM_PERCENT", default=20)
CELERY_TASK_DEFAULT_QUEUE = "celery"
# workloads.choices.Queue: workers run `-Q celery,reconcile,notify` (or a worker per queue).
CELERY_TASK_ROUTES = {
    "workloads.notify_job": {"queue": "notify"},
    **{
        f"workloads.{name}": {"queue": "reconcile"}
        for name in (
            "reconcile_job",
            "reconcile_job_uid",
            "reconcile_node",
            "record_k8s_event",
            "record_k8s_events",
            "sweep",
        )
    },
}
CELERY_TASK_ROUTES["workloads.reconcile_namespace"] = {"queue": GPUPORTAL_PROVISIONER_QUEUE or "reconcile"}
CELERY_BEAT_SCHEDULE = {
    "workloads-sweep": {
        "task": "workloads.sweep",
        "schedule": float(GPUPORTAL_SWEEP_SECONDS),
        "options": {"expires": GPUPORTAL_SWEEP_SECONDS * 0.9},
    },
    # Temporary quota grants end by themselves (the queue also ignores them past `until`).
    "workloads-grants-expire": {
        "task": "workloads.grants_expire",
        "schedule": 60.0,
        "options": {"expires": 50},
    },
    # Idle-GPU reclaim: thresholds live in the admin's queue settings (docs/operator-guide.md).
    "workloads-idle-sweep": {
        "task": "workloads.idle_sweep",
        "schedule": 60.0,
        "options": {"expires": 50},
    },
}
# gpu: telemetry retention and rollups (read through gpu/app_settings.py).
# Project webhooks may call private addresses (and plain http) only when the operator says so.
GPUPORTAL_WEBHOOK_ALLOW_PRIVATE = env.bool("GPUPORTAL_WEBHOOK_ALLOW_PRIVATE", default=False)
# Where the device plugin's sharing ConfigMap lives (the chart's node namespace).
GPU_PLUGIN_CONFIG_NAMESPACE = env.str("GPU_PLUGIN_CONFIG_NAMESPACE", default=SHARING_CONFIG_NAMESPACE)
GPU_RAW_RETENTION_DAYS = env.int("GPU_RAW_RETENTION_DAYS", default=2)
GPU_PARTITIONS_AHEAD_DAYS = env.int("GPU_PARTITIONS_AHEAD_DAYS", default=2)
GPU_ROLLUP_MINUTE_RETENTION_DAYS = env.int("GPU_ROLLUP_MINUTE_RETENTION_DAYS", default=30)
GPU_ROLLUP_HOUR_RETENTION_DAYS = env.int("GPU_ROLLUP_HOUR_RETENTION_DAYS", default=365)
GPU_PUSH_INTERVAL_MS = env.int("GPU_PUSH_INTERVAL_MS", default=1000)
GPU_METRICS_TOKEN = env.str("GPU_METRICS_TOKEN", default="")
# A GPU put out by a critical XID / ECC error returns by itself after this clean interval (gpu/health.py).
GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS = env.float("GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS", default=300.0)
# gpu: node agents sign in with their pod's projected ServiceAccount token, checked by a TokenReview
# (read through gpu/app_settings.py; docs/operator-guide.md). No accounts listed: node tokens only.
GPUPORTAL_AGENT_SERVICE_ACCOUNTS = env.list("GPUPORTAL_AGENT_SERVICE_ACCOUNTS", default=[])
GPUPORTAL_AGENT_TOKEN_AUDIENCE = env.str("GPUPORTAL_AGENT_TOKEN_AUDIENCE", default="gpu-portal")
GPUPORTAL_AGENT_REVIEW_CACHE_S = env.int("GPUPORTAL_AGENT_REVIEW_CACHE_S", default=60)
GPUPORTAL_AGENT_TOKEN_REVIEWER = "workloads.k8s.tokenreview.review_token"  # noqa: S105 - a dotted path
CELERY_BEAT_SCHEDULE.update(
    {
        "gpu-partitions": {
            "task": "gpu.partitions_maintain",
            "schedule": 3600.0,
            "options": {"expires": 3000},
        },
        "gpu-rollup-minutes": {"task": "gpu.rollup_minutes", "schedule": 60.0, "options": {"expires": 50}},
        "gpu-rollup-hours": {"task": "gpu.rollup_hours", "schedule": 3600.0, "options": {"expires": 3000}},
        "gpu-rollups-prune": {"task": "gpu.rollups_prune", "schedule": 3600.0, "options": {"expires": 3000}},
        "gpu-nodes-sweep": {"task": "gpu.nodes_sweep", "schedule": 60.0, "options": {"expires": 50}},
    }
)
# Unacked tasks of a killed worker come back after this (Redis transport); keep it above the
# longest task and short enough that a lost worker's work is redone quickly.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("GPUPORTAL_CELERY_VISIBILITY_TIMEOUT", default=300),
    "socket_connect_timeout": 2,
}
