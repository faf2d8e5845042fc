"""Telemetry ingest: validate a node agent's batch, store it, mark events, push the newest frames.

The wire shape is plugin/contract.py (docs/telemetry-contract.md); the portal never imports plugin/,
so the shape is checked here field by field. Validation is all-or-nothing: one bad sample refuses
the whole batch with a field message naming it (`samples[3].util_gpu`), and nothing is written.
Writes are idempotent by (GPU, ts): a retried batch stores nothing twice and counts duplicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from gpu import app_settings, broadcast, counters, health, peaks
from gpu.choices import SharingMode
from gpu.messages import GpuFrame, ProcessFrame
from gpu.models import Gpu, Node
from gpu.samples import Sample
from gpu.storage import SampleRow, store
from plugin.names import GPU_RESOURCE

MAX_ERRORS = 20
MAX_PROCESSES = 256
INT_FIELDS = (
    ("util_gpu", 0, 100),
    ("util_mem", 0, 100),
    ("mem_used_mib", 0, 1 << 31),
    ("mem_total_mib", 0, 1 << 31),
    ("sm_clock_mhz", 0, 100_000),
    ("mem_clock_mhz", 0, 100_000),
    ("ecc_sbe", 0, 1 << 62),
    ("ecc_dbe", 0, 1 << 62),
)
FLOAT_FIELDS = (("temp_c", -100.0, 200.0), ("power_w", 0.0, 10_000.0))
STR_FIELDS = ("pod_uid", "pod_namespace", "pod_name", "container")


class SampleError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@dataclass(frozen=True)
class IngestResult:
    accepted: int
    duplicates: int


def _int(sample: dict[str, Any], name: str, low: int, high: int) -> int:
    value = sample.get(name)
    if type(value) is not int or not low <= value <= high:
        raise SampleError(name, f"must be an integer in {low}..{high}")
    return value


def _float(sample: dict[str, Any], name: str, low: float, high: float) -> float:
    value: Any = sample.get(name)
    if type(value) not in (int, float) or not math.isfinite(value) or not low <= value <= high:
        raise SampleError(name, f"must be a number in {low:g}..{high:g}")
    return float(value)


def _ts(value: Any, *, oldest: datetime, newest: datetime) -> datetime:
    if not isinstance(value, str):
        raise SampleError("ts", "must be an RFC 3339 UTC timestamp string")
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        raise SampleError("ts", "must be an RFC 3339 UTC timestamp, e.g. 2026-11-30T12:00:00.123Z") from None
    if ts.tzinfo is None or ts.utcoffset() != timedelta(0):
        raise SampleError("ts", "must be in UTC (end with Z)")
    if not oldest <= ts <= newest:
        raise SampleError("ts", "is outside the accepted window (raw retention .. now + clock skew)")
    return ts.astimezone(UTC)


def _process(raw: Any, i: int) -> ProcessFrame:
    where = f"processes[{i}]"
    if not isinstance(raw, dict):
        raise SampleError(where, "must be an object")
    pid, mem = raw.get("pid"), raw.get("mem_used_mib")
    if type(pid) is not int or pid < 0 or type(mem) is not int or mem < 0:
        raise SampleError(where, "needs integer pid and mem_used_mib >= 0")
    for name in STR_FIELDS:
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > 253):
            raise SampleError(f"{where}.{name}", "must be a string (<= 253 characters) or null")
    return ProcessFrame(
        pid=pid,
        mem_used_mib=mem,
        pod_namespace=raw.get("pod_namespace"),
        pod_name=raw.get("pod_name"),
        container=raw.get("container"),
    )


def _sample(raw: Any, *, oldest: datetime, newest: datetime) -> Sample:
    if not isinstance(raw, dict):
        raise SampleError("", "must be an object")
    uuid = raw.get("gpu_uuid")
    if not isinstance(uuid, str) or not 1 <= len(uuid) <= 64:
        raise SampleError("gpu_uuid", "must be a GPU UUID string (1..64 characters)")
    values: dict[str, Any] = {name: _int(raw, name, lo, hi) for name, lo, hi in INT_FIELDS}
    values.update({name: _float(raw, name, lo, hi) for name, lo, hi in FLOAT_FIELDS})
    xid = raw.get("xid")
    if xid is not None and type(xid) is not int:
        raise SampleError("xid", "must be an integer or null")
    values["xid"] = xid
    procs = raw.get("processes")
    if not isinstance(procs, list) or len(procs) > MAX_PROCESSES:
        raise SampleError("processes", f"must be a list of at most {MAX_PROCESSES} processes")
    ts = _ts(raw.get("ts"), oldest=oldest, newest=newest)
    return Sample(uuid, ts, values, [_process(p, i) for i, p in enumerate(procs)])


def parse_batch(raw: Any, *, now: datetime) -> tuple[str, list[Sample]]:
    """The node name and its valid samples; raises ValidationError naming every bad field (up to 20)."""
    if not isinstance(raw, dict):
        raise ValidationError({"non_field_errors": ["The body must be a JSON object."]})
    node, samples = raw.get("node"), raw.get("samples")
    errors: dict[str, list[str]] = {}
    if not isinstance(node, str) or not node:
        errors["node"] = ["Required: the node's name."]
    if not isinstance(samples, list) or not 1 <= len(samples) <= app_settings.max_batch():
        errors["samples"] = [f"Required: a list of 1..{app_settings.max_batch()} samples."]
    if errors:
        raise ValidationError(errors)
    assert isinstance(node, str)  # noqa: S101 - narrowed above
    assert isinstance(samples, list)  # noqa: S101 - narrowed above
    oldest = now - timedelta(days=app_settings.raw_retention_days())
    newest = now + timedelta(seconds=app_settings.max_clock_skew_s())
    parsed: list[Sample] = []
    for i, item in enumerate(samples):
        try:
            parsed.append(_sample(item, oldest=oldest, newest=newest))
        except SampleError as exc:
            errors[f"samples[{i}].{exc.field}".rstrip(".")] = [exc.message]
            if len(errors) >= MAX_ERRORS:
                break
    if errors:
        raise ValidationError(errors)
    return node, parsed


def _check_room(node: Node, gpus: dict[str, Gpu], new: list[str]) -> None:
    """A node's agent cannot make up GPUs: the total stays within what Kubernetes says the node has."""
    shared = sum(1 for gpu in gpus.values() if gpu.sharing_mode == SharingMode.SHARED)
    limit = node.gpu_allowance(shared=shared)
    if len(gpus) + len(new) > limit:
        raise PermissionDenied(
            f"The batch names {len(new)} new GPU(s), but node {node.name} already has {len(gpus)} of the "
            f"{limit} GPUs its Kubernetes capacity ({GPU_RESOURCE}) allows; nothing was stored."
        )


def _resolve_gpus(node: Node, samples: list[Sample]) -> dict[str, Gpu]:
    """This node's GPUs by UUID; new UUIDs become GPUs of this node, other nodes' UUIDs are refused."""
    gpus = {gpu.uuid: gpu for gpu in Gpu.objects.filter(node=node)}
    new = list(dict.fromkeys(s.uuid for s in samples if s.uuid not in gpus))
    if not new:
        return gpus
    if Gpu.objects.filter(uuid__in=new).exists():
        raise PermissionDenied("A sample names a GPU of another node; a node agent writes its own GPUs only.")
    _check_room(node, gpus, new)
    next_index = max((gpu.index for gpu in gpus.values()), default=-1) + 1
    totals = {s.uuid: s.values["mem_total_mib"] for s in samples}
    for offset, uuid in enumerate(new):
        gpus[uuid] = Gpu.objects.create(
            node=node, index=next_index + offset, uuid=uuid, model=node.gpu_model, memory_mib=totals[uuid]
        )
    return gpus


def _row(gpu_id: int, s: Sample) -> SampleRow:
    v = s.values
    procs = orjson.dumps(s.processes).decode() if s.processes else None
    return (
        gpu_id, s.ts, v["util_gpu"], v["util_mem"], v["mem_used_mib"], v["mem_total_mib"], v["temp_c"],
        v["power_w"], v["sm_clock_mhz"], v["mem_clock_mhz"], v["ecc_sbe"], v["ecc_dbe"], v["xid"], procs,
    )  # fmt: skip


def frame(gpu: Gpu, node: str, s: Sample) -> GpuFrame:
    v = s.values
    return GpuFrame(
        uuid=gpu.uuid, node=node, index=gpu.index, ts=s.ts.isoformat().replace("+00:00", "Z"),
        util_gpu=v["util_gpu"], util_mem=v["util_mem"], mem_used_mib=v["mem_used_mib"],
        mem_total_mib=v["mem_total_mib"], temp_c=v["temp_c"], power_w=v["power_w"],
        sm_clock_mhz=v["sm_clock_mhz"], mem_clock_mhz=v["mem_clock_mhz"], xid=v["xid"], health=gpu.health,
        sharing_mode=gpu.sharing_mode, in_service=gpu.in_service, processes=s.processes,
    )  # fmt: skip


def _latest(samples: list[Sample]) -> dict[str, Sample]:
    latest: dict[str, Sample] = {}
    for s in samples:
        if s.uuid not in latest or s.ts > latest[s.uuid].ts:
            latest[s.uuid] = s
    return latest


def ingest_batch(*, node: Node, raw: Any) -> IngestResult:
    """Validate, store, mark health, and push the newest frame per GPU after commit. `node` is the
    authenticated agent's own node (its node token's, or its ServiceAccount token's node claim).

    Counted for /metrics in the shared totals (gpu/counters.py): a refused batch at once, with its
    samples; a stored one once it commits (a rolled-back batch stored nothing)."""
    try:
        result = _ingest(node, raw)
    except (ValidationError, PermissionDenied):
        samples = raw.get("samples") if isinstance(raw, dict) else None
        refused = len(samples) if isinstance(samples, list) else 0
        counters.add({_counted("samples", "refused"): refused, _counted("batches", "refused"): 1})
        raise
    counts = {
        _counted("samples", "accepted"): result.accepted,
        _counted("samples", "duplicate"): result.duplicates,
        _counted("batches", "accepted"): 1,
    }
    transaction.on_commit(lambda: counters.add(counts))
    return result


def refuse_unread(message: str) -> ValidationError:
    """A batch refused before its samples were read (too large, not JSON): counted as one refused
    batch, with no samples (none were seen); the caller raises the error returned."""
    counters.add({_counted("batches", "refused"): 1})
    return ValidationError({"non_field_errors": [message]})


def _counted(what: str, result: str) -> str:
    return counters.field(f"gpuportal_ingest_{what}", (result,))


def _ingest(node: Node, raw: Any) -> IngestResult:
    now = timezone.now()
    node_name, samples = parse_batch(raw, now=now)
    if node_name != node.name:
        raise PermissionDenied(f"This agent signed in for node {node.name}; it cannot write {node_name}.")
    unique = list({(s.uuid, s.ts): s for s in samples}.values())
    with transaction.atomic(savepoint=False):
        gpus = _resolve_gpus(node, unique)
        accepted = store().write([_row(gpus[s.uuid].pk, s) for s in unique])
        latest = _latest(unique)
        health.record(node=node, gpus=gpus, samples=unique, latest=latest, now=now)
        if readings := peaks.pod_readings(unique):  # per-job peaks and busy time (workloads listens)
            peaks.pod_readings_stored.send(sender=Node, readings=readings)
    frames = [frame(gpus[uuid], node.name, s) for uuid, s in latest.items()]
    transaction.on_commit(lambda: broadcast.samples_published(node=node.name, frames=frames))
    return IngestResult(accepted=accepted, duplicates=len(samples) - accepted)


def parse_body(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise refuse_unread("The body is not valid JSON.") from None
