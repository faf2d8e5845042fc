"""The labels and metadata every object the portal writes carries, so it can find its own again."""

from __future__ import annotations

from typing import Any

from plugin.names import MANAGED_BY_LABEL, MANAGER

MANAGED_BY = MANAGED_BY_LABEL
UID_LABEL = "gpuportal.dev/job-uid"
PROJECT_LABEL = "gpuportal.dev/project"
# The Job controller's: the worker index of each pod of an Indexed Job (a job of several workers).
WORKER_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
# Writes use one field manager, so server-side apply knows which fields are the portal's.
FIELD_MANAGER = MANAGER


def worker_index(obj: dict[str, Any]) -> int | None:
    """A pod's worker index (WORKER_INDEX_LABEL); None: not a worker of a job of several."""
    value = str(((obj.get("metadata") or {}).get("labels") or {}).get(WORKER_INDEX_LABEL, ""))
    return int(value) if value.isdigit() else None


def managed() -> dict[str, str]:
    return {MANAGED_BY: MANAGER}


def object_meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, object]:
    """`metadata` of a portal-made object: its name, namespace and the managed-by label plus `labels`."""
    meta: dict[str, object] = {"name": name, "labels": {**managed(), **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta
