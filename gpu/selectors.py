"""Reads for nodes, GPUs and telemetry. They own select_related and the viewer's tenancy scope."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.db import connection
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from accounts.models import Project, User
from accounts.selectors import is_operator
from gpu import storage
from gpu.choices import GpuHealth, SharingMode
from gpu.frames import frame
from gpu.messages import GpuFrame
from gpu.models import Gpu, GpuEvent, GpuSample, Node

LATEST_WITHIN = timedelta(seconds=30)


def node_list(*, include_deleted: bool = False) -> QuerySet[Node]:
    qs = Node.objects.all()
    return qs if include_deleted else qs.filter(deleted=False)


def node_get(*, name: str) -> Node:
    node = node_list().filter(name=name).first()
    if node is None:
        raise Http404("No such node.")
    return node


def gpu_list(*, node: Node | None = None) -> QuerySet[Gpu]:
    qs = Gpu.objects.select_related("node").filter(node__deleted=False)
    return qs.filter(node=node) if node is not None else qs


def gpu_events(*, gpu: Gpu, limit: int = 50) -> QuerySet[GpuEvent]:
    return GpuEvent.objects.filter(gpu=gpu).order_by("-ts")[:limit]


def user_namespaces(*, user: User) -> frozenset[str] | None:
    """None for operators (they see all); else the namespaces of the user's active projects."""
    if is_operator(user):
        return None
    projects = Project.objects.filter(is_active=True, memberships__user=user)
    return frozenset(project.namespace for project in projects)


def _frame(gpu: Gpu, row: GpuSample) -> GpuFrame:
    """A stored sample's frame (the GPU's node selected with it): the same keys as ingest's."""
    values = {name: getattr(row, name) for name in storage.COLUMNS[1:]}
    for name in storage.JSON_COLUMNS:
        values[name] = _json(values[name])
    return frame(values, gpu.frame_facts(gpu.node.name))


def _json(value: Any) -> Any:
    if isinstance(value, str):  # SQLite keeps JSON as text
        return orjson.loads(value)
    return [] if value is None else value  # an empty list is stored as NULL


def latest_frames(*, gpus: list[Gpu], now: datetime | None = None) -> dict[str, GpuFrame]:
    """The newest sample of each GPU from the last 30 s, as frames (a page's first paint)."""
    since = (now or timezone.now()) - LATEST_WITHIN
    by_id = {gpu.pk: gpu for gpu in gpus}
    latest: dict[int, GpuSample] = {}
    for sample in GpuSample.objects.filter(gpu_id__in=list(by_id), ts__gte=since).order_by("ts"):
        latest[sample.gpu_id] = sample
    return {by_id[gid].uuid: _frame(by_id[gid], sample) for gid, sample in latest.items()}


def history(*, gpus: list[Gpu], minutes: int = 15, now: datetime | None = None) -> dict[str, list[GpuFrame]]:
    """Raw frames of the last `minutes` per GPU, oldest first (the node and job charts)."""
    since = (now or timezone.now()) - timedelta(minutes=minutes)
    by_id = {gpu.pk: gpu for gpu in gpus}
    out: dict[str, list[GpuFrame]] = {gpu.uuid: [] for gpu in gpus}
    rows = GpuSample.objects.filter(gpu_id__in=list(by_id), ts__gte=since).order_by("ts")
    for sample in rows.iterator(chunk_size=2000):
        gpu = by_id[sample.gpu_id]
        out[gpu.uuid].append(_frame(gpu, sample))
    return out


def gpus_by_state() -> dict[str, int]:
    """GPU counts per (health, service) for /metrics."""
    counts: dict[str, int] = {}
    for health, in_service in gpu_list().values_list("health", "in_service"):
        key = f"{health}:{'in' if in_service else 'out'}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def plugin_config(*, node: Node | None = None) -> dict[str, Any]:
    """The plugin's sharing file: {"gpus": {"<uuid>": {"mode", "slices"}}} for every GPU of every
    live node (UUIDs are unique, each plugin reads its own), or of one node when given."""
    gpus = gpu_list().order_by("node__name", "index")
    if node is not None:
        gpus = gpus.filter(node=node)
    return {"gpus": {gpu.uuid: gpu.plugin_entry for gpu in gpus}}


def shared_slices_by_node(*, include_deleted: bool = False) -> dict[str, list[int]]:
    """Node name -> the slice count of each of its shared GPUs (index order), as operators set them.
    `include_deleted`: nodes gone from the cluster too (accounting prices jobs that ran on them)."""
    out: dict[str, list[int]] = {}
    gpus = Gpu.objects.all() if include_deleted else gpu_list()
    shared = gpus.filter(sharing_mode=SharingMode.SHARED).order_by("node__name", "index")
    for name, slices in shared.values_list("node__name", "slices"):
        out.setdefault(name, []).append(int(slices))
    return out


def cross_project_nodes() -> frozenset[str]:
    """Nodes whose shared GPUs are all marked cross-project: the only nodes where the admission
    queue puts slices of several projects side by side."""
    rows = gpu_list().filter(sharing_mode=SharingMode.SHARED).values_list("node__name", "cross_project")
    closed = {name for name, cross in rows if not cross}
    return frozenset(name for name, _ in rows) - closed


def unoffered_whole_by_node() -> dict[str, int]:
    """Node name -> its exclusive GPUs the plugin is told not to offer (unhealthy or out of service)."""
    out: dict[str, int] = {}
    gpus = gpu_list().filter(sharing_mode=SharingMode.EXCLUSIVE)
    out_of_service = gpus.filter(Q(in_service=False) | Q(health=GpuHealth.UNHEALTHY))
    for name in out_of_service.values_list("node__name", flat=True):
        out[name] = out.get(name, 0) + 1
    return out


def gpu_models_by_node() -> dict[str, str]:
    """Node name -> its GPU product (gone nodes too): accounting's GPU type of a job that ran there."""
    return dict(Node.objects.exclude(gpu_model="").values_list("name", "gpu_model"))


@dataclass(frozen=True)
class PodActivity:
    """What the samples of [since, until] say of one pod on one GPU (idle reclaim reads this)."""

    namespace: str
    pod: str
    gpu_uuid: str
    samples: int
    first_ts: datetime
    last_ts: datetime
    max_util_gpu: int
    min_mem_used_mib: int
    max_mem_used_mib: int
    mem_total_mib: int


_ACTIVITY_PG = """
SELECT p->>'pod_namespace', p->>'pod_name', g.uuid, count(DISTINCT s.ts), min(s.ts), max(s.ts),
       max(s.util_gpu), min(s.mem_used_mib), max(s.mem_used_mib), max(s.mem_total_mib)
FROM gpu_sample s JOIN gpu_gpu g ON g.id = s.gpu_id
CROSS JOIN LATERAL jsonb_array_elements(
    CASE WHEN jsonb_typeof(s.processes) = 'array' THEN s.processes ELSE '[]'::jsonb END) p
WHERE s.ts >= %s AND s.ts <= %s AND p->>'pod_namespace' = ANY(%s)
GROUP BY 1, 2, 3
"""
_ACTIVITY_SQLITE = """
SELECT json_extract(p.value, '$.pod_namespace'), json_extract(p.value, '$.pod_name'), g.uuid,
       count(DISTINCT s.ts), min(s.ts), max(s.ts), max(s.util_gpu), min(s.mem_used_mib),
       max(s.mem_used_mib), max(s.mem_total_mib)
FROM gpu_sample s JOIN gpu_gpu g ON g.id = s.gpu_id, json_each(s.processes) p
WHERE s.ts >= %s AND s.ts <= %s AND json_extract(p.value, '$.pod_namespace') IN ({marks})
GROUP BY 1, 2, 3
"""


def pod_activity(*, namespaces: list[str], since: datetime, until: datetime) -> list[PodActivity]:
    """Per (pod, GPU) aggregates of the raw samples in [since, until] whose processes name a pod of
    `namespaces`: one grouped query (the database walks the samples, not Python)."""
    if not namespaces:
        return []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_ACTIVITY_PG, [since, until, list(namespaces)])
        else:
            marks = ", ".join(["%s"] * len(namespaces))
            cursor.execute(_ACTIVITY_SQLITE.format(marks=marks), [_naive(since), _naive(until), *namespaces])
        rows = cursor.fetchall()
    return [_activity(row) for row in rows if row[0] and row[1]]


def _naive(ts: datetime) -> str:
    # SQLite keeps sample times as naive UTC text (gpu.storage._sqlite).
    return ts.astimezone(UTC).replace(tzinfo=None).isoformat(" ")


def _activity(row: tuple[Any, ...]) -> PodActivity:
    first, last = (_aware(v) for v in row[4:6])
    return PodActivity(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        int(row[3]),
        first,
        last,
        int(row[6]),
        int(row[7]),
        int(row[8]),
        int(row[9]),
    )


def _aware(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)
