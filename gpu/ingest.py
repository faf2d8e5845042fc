"""Telemetry ingest: validate a node agent's batch, store it, mark events, push the newest frames.

The wire shape is declared once, in plugin/contract.py (docs/telemetry-contract.md), and checked by
msgspec in one pass (gpu/wire.py); the stored row and the live frame are derived from it. Validation
is all-or-nothing: the first bad field refuses the whole batch with a message naming it
(`samples[3].util_gpu`), and nothing is written.
Writes are idempotent by (GPU, ts): a retried batch stores nothing twice and counts duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any

import orjson
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from gpu import app_settings, broadcast, counters, health, peaks, storage, wire
from gpu.choices import SharingMode
from gpu.frames import frame
from gpu.models import Gpu, Node
from gpu.wire import Sample
from plugin.names import GPU_RESOURCE

ZERO = timedelta(0)
_UTC = {UTC}  # msgspec decodes "Z" and "+00:00" to fixed offsets equal to it
_TS = attrgetter("ts")


@dataclass(frozen=True)
class IngestResult:
    accepted: int
    duplicates: int


def _out_of_window(samples: list[Sample], *, now: datetime) -> ValidationError | None:
    """The first sample stamped outside raw retention .. now + clock skew, or not in UTC."""
    oldest = now - timedelta(days=app_settings.raw_retention_days())
    newest = now + timedelta(seconds=app_settings.max_clock_skew_s())
    # The common case in C-level passes (a Python loop per sample was a fifth of decoding); the
    # loop below only names the culprit.
    if {s.ts.tzinfo for s in samples} == _UTC and (
        oldest <= min(samples, key=_TS).ts and max(samples, key=_TS).ts <= newest
    ):
        return None
    for i, s in enumerate(samples):
        if s.ts.utcoffset() != ZERO:
            return ValidationError({f"samples[{i}].ts": ["must be in UTC (end with Z)"]})
        if not oldest <= s.ts <= newest:
            why = "is outside the accepted window (raw retention .. now + clock skew)"
            return ValidationError({f"samples[{i}].ts": [why]})
    return None


def parse_batch(raw: bytes | Any, *, now: datetime) -> tuple[str, list[Sample]]:
    """The node name and its valid samples, from the request body (or a parsed object); raises
    ValidationError naming the first bad field (`samples[3].util_gpu`), wire.NotJson for a body that
    is not JSON. The shape and the bounds are checked by msgspec in C (gpu/wire.py): no Python loop
    per field."""
    try:
        batch = wire.read(raw)
    except wire.WireError as exc:
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from None
    if not 1 <= len(batch.samples) <= app_settings.max_batch():
        raise ValidationError({"samples": [f"Required: a list of 1..{app_settings.max_batch()} samples."]})
    if (error := _out_of_window(batch.samples, now=now)) is not None:
        raise error
    return batch.node, batch.samples


def _check_room(node: Node, gpus: dict[str, Gpu], new: list[str]) -> None:
    """A node's agent cannot make up GPUs: the total stays within what Kubernetes says the node has."""
    shared = sum(1 for gpu in gpus.values() if gpu.sharing_mode == SharingMode.SHARED)
    limit = node.gpu_allowance(shared=shared)
    if len(gpus) + len(new) > limit:
        raise PermissionDenied(
            f"The batch names {len(new)} new GPU(s), but node {node.name} already has {len(gpus)} of the "
            f"{limit} GPUs its Kubernetes capacity ({GPU_RESOURCE}) allows; nothing was stored."
        )


def _node_gpus(node: Node) -> dict[str, Gpu]:
    return {gpu.uuid: gpu for gpu in Gpu.objects.filter(node=node).order_by("index")}


def _resolve_gpus(node: Node, samples: list[Sample]) -> dict[str, Gpu]:
    """This node's GPUs by UUID; new UUIDs become GPUs of this node, other nodes' UUIDs are refused."""
    gpus = _node_gpus(node)
    new = list(dict.fromkeys(s.gpu_uuid for s in samples if s.gpu_uuid not in gpus))
    if not new:
        return gpus
    if Gpu.objects.filter(uuid__in=new).exists():
        raise PermissionDenied("A sample names a GPU of another node; a node agent writes its own GPUs only.")
    _check_room(node, gpus, new)
    next_index = max((gpu.index for gpu in gpus.values()), default=-1) + 1
    totals = {s.gpu_uuid: s.mem_total_mib for s in samples}
    for offset, uuid in enumerate(new):
        gpus[uuid] = Gpu.objects.create(
            node=node, index=next_index + offset, uuid=uuid, model=node.gpu_model, memory_mib=totals[uuid]
        )
    return gpus


def _latest(ordered: list[Sample]) -> dict[str, Sample]:
    """Each GPU's newest sample, from samples in time order (the last one of a GPU wins)."""
    return {s.gpu_uuid: s for s in ordered}


def ingest_batch(*, node: Node, raw: bytes | Any) -> IngestResult:
    """Validate, store, mark health, and push the newest frame per GPU after commit. `node` is the
    authenticated agent's own node (its node token's, or its ServiceAccount token's node claim).

    Counted for /metrics in the shared totals (gpu/counters.py): a refused batch at once, with its
    samples; a stored one once it commits (a rolled-back batch stored nothing). Counts are deferred
    (sent by a thread within a second): a Redis round trip per batch was a tenth of ingest."""
    try:
        result = _ingest(node, raw)
    except wire.NotJson as exc:
        raise refuse_unread(str(exc)) from None
    except (ValidationError, PermissionDenied):
        refused = {_counted("samples", "refused"): _sample_count(raw), _counted("batches", "refused"): 1}
        counters.defer(refused)
        raise
    counts = {
        _counted("samples", "accepted"): result.accepted,
        _counted("samples", "duplicate"): result.duplicates,
        _counted("batches", "accepted"): 1,
    }
    transaction.on_commit(lambda: counters.defer(counts))
    return result


def refuse_unread(message: str) -> ValidationError:
    """A batch refused before its samples were read (too large, not JSON): counted as one refused
    batch, with no samples (none were seen); the caller raises the error returned."""
    counters.defer({_counted("batches", "refused"): 1})
    return ValidationError({"non_field_errors": [message]})


def _counted(what: str, result: str) -> str:
    return counters.field(f"gpuportal_ingest_{what}", (result,))


def _ingest(node: Node, raw: Any) -> IngestResult:
    now = timezone.now()
    node_name, samples = parse_batch(raw, now=now)
    if node_name != node.name:
        raise PermissionDenied(f"This agent signed in for node {node.name}; it cannot write {node_name}.")
    # In time order, as health and peaks read them (an agent sends them so: the sort is one pass).
    unique = sorted({(s.gpu_uuid, s.ts): s for s in samples}.values(), key=_TS)
    with transaction.atomic(savepoint=False):
        gpus = _resolve_gpus(node, unique)
        accepted = storage.store().write([storage.row(gpus[s.gpu_uuid].pk, s) for s in unique])
        latest = _latest(unique)
        health.record(node=node, gpus=gpus, samples=unique, latest=latest, now=now)
        if readings := peaks.pod_readings(unique):  # per-job peaks and busy time (workloads listens)
            peaks.pod_readings_stored.send(sender=Node, readings=readings)
    frames = [frame(s, gpus[uuid].frame_facts(node.name)) for uuid, s in latest.items()]
    transaction.on_commit(lambda: broadcast.samples_published(node=node.name, frames=frames))
    return IngestResult(accepted=accepted, duplicates=len(samples) - accepted)


def _sample_count(raw: bytes | Any) -> int:
    """Samples of a refused batch, for the refused count (the refusal path only: it parses again)."""
    if isinstance(raw, bytes):
        raw = orjson.loads(raw)
    samples = raw.get("samples") if isinstance(raw, dict) else None
    return len(samples) if isinstance(samples, list) else 0
