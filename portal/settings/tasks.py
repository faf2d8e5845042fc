"""Celery: delivery that survives a lost worker or broker, the task queues and the beat schedule."""

from __future__ import annotations

from portal.settings.environment import (
    GPUPORTAL_PROVISIONER_QUEUE,
    GPUPORTAL_SWEEP_SECONDS,
    celery_visibility_timeout,
)

CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-task leaves the message for another worker
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 90
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers and beat retry a broker that is down every 2 s (portal/broker.py) for as long as it is down:
# Celery's default of 100 tries would end them after 200 s of an outage (beat and the worker exited
# in a 5-minute outage drill), and Kubernetes would then restart them only after its own back-off.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Celery's Django fixup closes every connection before and after each task, whatever CONN_MAX_AGE
# says, unless this is set (it then closes them once per this many tasks); portal/celery.py closes
# them around a task the way Django does around a request: when obsolete or broken.
CELERY_DB_REUSE_MAX = 1_000_000
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": celery_visibility_timeout,
    "socket_connect_timeout": 2,
}

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
    # Namespace writes go to the worker that runs as the provisioner identity, where there is one.
    "workloads.reconcile_namespace": {"queue": GPUPORTAL_PROVISIONER_QUEUE or "reconcile"},
}


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
    "workloads-idle-sweep": {"task": "workloads.idle_sweep", "schedule": 60.0, "options": {"expires": 50}},
    # gpu: telemetry partitions, rollups and their retention; nodes whose agent went quiet.
    "gpu-partitions": {"task": "gpu.partitions_maintain", "schedule": 3600.0, "options": {"expires": 3000}},
    "gpu-rollup-minutes": {"task": "gpu.rollup_minutes", "schedule": 60.0, "options": {"expires": 50}},
    "gpu-rollup-hours": {"task": "gpu.rollup_hours", "schedule": 3600.0, "options": {"expires": 3000}},
    "gpu-rollups-prune": {"task": "gpu.rollups_prune", "schedule": 3600.0, "options": {"expires": 3000}},
    "gpu-nodes-sweep": {"task": "gpu.nodes_sweep", "schedule": 60.0, "options": {"expires": 50}},
}
