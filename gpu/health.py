"""GPU health from telemetry: XIDs and ECC counters become GpuEvents and move `Gpu.health`.

Runs inside the ingest transaction. Idempotent for a retried batch: events are unique per
(GPU, kind, ts) and ECC events fire only when a counter rises above the stored one. `last_seen`
is written at most every LAST_SEEN_EVERY per GPU, so 1 Hz telemetry does not mean 1 Hz UPDATEs.

The rule (docs/operator-guide.md "GPU health"): a critical XID (any but the application XIDs) or a
double-bit ECC error makes the GPU unhealthy, new correctable errors make it degraded; after the
clean interval (`app_settings.health_clean_seconds()`) with no new such event, the next clean sample
is the passing check and the GPU is healthy again. A GPU that turns unhealthy is announced on
`gpu.signals.gpu_failed` after commit (workloads requeues its jobs); any change of whether a GPU is
offered re-runs the node task (sharing ConfigMap `in_service`, cordon when all of a node's GPUs are out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from gpu import app_settings, services
from gpu.choices import APPLICATION_XIDS, GpuEventKind, GpuHealth
from gpu.models import Gpu, GpuEvent, Node
from gpu.wire import Sample

LAST_SEEN_EVERY = timedelta(seconds=10)
_GPU_SEEN = f"UPDATE {Gpu._meta.db_table} SET last_seen = %s WHERE id IN ({{marks}})"  # noqa: S608
_NODE_SEEN = f"UPDATE {Node._meta.db_table} SET last_seen = %s WHERE id = %s"  # noqa: S608
SEVERITY = {GpuHealth.UNKNOWN: 0, GpuHealth.HEALTHY: 1, GpuHealth.DEGRADED: 2, GpuHealth.UNHEALTHY: 3}
DEGRADED_REASON = "correctable ECC errors"


@dataclass(frozen=True)
class Observed:
    """What one batch says of one GPU: the worst health it shows and why (None: a clean sample)."""

    health: GpuHealth | None = None
    reason: str = ""


@dataclass
class Outcome:
    """What `record` changed, for the caller's after-commit effects."""

    failed: dict[str, str] = field(default_factory=dict)  # uuid -> reason, newly unhealthy
    pods: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # uuid -> (namespace, pod) on it
    offer_changed: bool = False  # some GPU became (un)offered: the node task must run


def is_critical_xid(xid: int | None) -> bool:
    return xid is not None and xid not in APPLICATION_XIDS


def _xid_events(gpus: dict[str, Gpu], samples: list[Sample]) -> tuple[list[GpuEvent], dict[str, str]]:
    events, critical = [], {}
    for s in samples:  # in time order (ingest sorts them)
        xid = s.xid
        if xid is None:
            continue
        kind = "critical" if is_critical_xid(xid) else "application"
        events.append(
            GpuEvent(
                gpu=gpus[s.gpu_uuid], kind=GpuEventKind.XID, ts=s.ts, xid=xid, message=f"XID {xid} ({kind})"
            )
        )
        if is_critical_xid(xid):
            critical[s.gpu_uuid] = f"XID {xid}"
    return events, critical


def _ecc_events(gpu: Gpu, s: Sample) -> tuple[list[GpuEvent], Observed]:
    events: list[GpuEvent] = []
    observed = Observed()
    sbe, dbe = s.ecc_sbe, s.ecc_dbe
    if sbe > gpu.ecc_sbe:
        events.append(GpuEvent(gpu=gpu, kind=GpuEventKind.ECC_SBE, ts=s.ts, value=sbe - gpu.ecc_sbe))
        observed = Observed(GpuHealth.DEGRADED, DEGRADED_REASON)
    if dbe > gpu.ecc_dbe:
        events.append(GpuEvent(gpu=gpu, kind=GpuEventKind.ECC_DBE, ts=s.ts, value=dbe - gpu.ecc_dbe))
        observed = Observed(GpuHealth.UNHEALTHY, "ECC double-bit error")
    return events, observed


def next_health(
    current: str, observed: GpuHealth | None, *, last_bad_at: datetime | None, now: datetime, clean: timedelta
) -> str:
    """Pure rule. A bad observation worsens health; a clean sample turns UNKNOWN into HEALTHY, and a
    degraded or unhealthy GPU into HEALTHY once `clean` has passed since its last bad event."""
    if observed is not None:
        return observed if SEVERITY[observed] > SEVERITY[GpuHealth(current)] else current
    if current == GpuHealth.UNKNOWN:
        return GpuHealth.HEALTHY
    if current in (GpuHealth.DEGRADED, GpuHealth.UNHEALTHY) and (
        last_bad_at is None or now - last_bad_at >= clean
    ):
        return GpuHealth.HEALTHY
    return current


def _apply(gpu: Gpu, s: Sample, observed: Observed, events: list[GpuEvent]) -> list[str]:
    """Move health by the rule; returns the changed fields."""
    fields = []
    if observed.health is not None:
        gpu.last_bad_at = max(s.ts, gpu.last_bad_at) if gpu.last_bad_at else s.ts
        fields.append("last_bad_at")
    clean = timedelta(seconds=app_settings.health_clean_seconds())
    health = next_health(gpu.health, observed.health, last_bad_at=gpu.last_bad_at, now=s.ts, clean=clean)
    if health != gpu.health:
        why = observed.reason if health != GpuHealth.HEALTHY else "clean interval passed, clean sample"
        events.append(
            GpuEvent(
                gpu=gpu, kind=GpuEventKind.HEALTH, ts=s.ts, message=f"{gpu.health} -> {health}: {why}"[:300]
            )
        )
        gpu.health = health
        gpu.health_reason = observed.reason if health != GpuHealth.HEALTHY else ""
        fields += ["health", "health_reason"]
    return fields


def _update_gpu(gpu: Gpu, s: Sample, observed: Observed, events: list[GpuEvent]) -> bool:
    """Save health/ECC changes at once; return True when only `last_seen` is due (batched by caller)."""
    fields = _apply(gpu, s, observed, events)
    if (s.ecc_sbe, s.ecc_dbe) != (gpu.ecc_sbe, gpu.ecc_dbe):
        gpu.ecc_sbe, gpu.ecc_dbe = s.ecc_sbe, s.ecc_dbe
        fields += ["ecc_sbe", "ecc_dbe"]
    due = gpu.last_seen is None or s.ts - gpu.last_seen >= LAST_SEEN_EVERY
    if due or fields:
        gpu.last_seen = max(s.ts, gpu.last_seen) if gpu.last_seen else s.ts
    if fields:
        gpu.save(update_fields=[*dict.fromkeys(fields), "last_seen"])
        return False
    return due


def _observe(gpu: Gpu, s: Sample, critical: str | None) -> tuple[list[GpuEvent], Observed]:
    events, observed = _ecc_events(gpu, s)
    if critical is not None and observed.health != GpuHealth.UNHEALTHY:
        observed = Observed(GpuHealth.UNHEALTHY, critical)
    return events, observed


def _pods(uuid: str, samples: list[Sample]) -> list[tuple[str, str]]:
    found = {
        (p.pod_namespace, p.pod_name)
        for s in samples
        if s.gpu_uuid == uuid
        for p in s.processes
        if p.pod_namespace and p.pod_name
    }
    return sorted(found)


def _stamp_seen(node: Node, gpus: list[Gpu], *, node_due: bool) -> None:
    """Write the due `last_seen` stamps: the GPUs' (one value, they reported in the same batch) and
    the node's, in one statement on Postgres. Fixed SQL: the ORM's two compiled UPDATEs (a save and
    an update) cost a fifth of a batch's ingest whenever they were due (measured with py-spy)."""
    adapt = connection.ops.adapt_datetimefield_value
    statements: list[tuple[str, list[Any]]] = []
    if gpus:
        stamp = max(g.last_seen for g in gpus if g.last_seen)
        marks = ", ".join(["%s"] * len(gpus))
        statements.append((_GPU_SEEN.format(marks=marks), [adapt(stamp), *(g.pk for g in gpus)]))
    if node_due:
        statements.append((_NODE_SEEN, [adapt(node.last_seen), node.pk]))
    if len(statements) == 2 and connection.vendor == "postgresql":  # SQLite has no UPDATE in a WITH
        (gpu_sql, gpu_params), (node_sql, node_params) = statements
        statements = [(f"WITH gpus AS ({gpu_sql}) {node_sql}", gpu_params + node_params)]
    with connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)


def record(
    *, node: Node, gpus: dict[str, Gpu], samples: list[Sample], latest: dict[str, Sample], now: datetime
) -> Outcome:
    events, critical = _xid_events(gpus, samples)
    outcome = Outcome()
    seen: list[Gpu] = []
    for uuid, s in latest.items():
        gpu = gpus[uuid]
        offered = gpu.offered
        ecc, observed = _observe(gpu, s, critical.get(uuid))
        events += ecc
        was_unhealthy = gpu.health == GpuHealth.UNHEALTHY
        if _update_gpu(gpu, s, observed, events):
            seen.append(gpu)
        if gpu.health == GpuHealth.UNHEALTHY and not was_unhealthy:
            outcome.failed[uuid] = gpu.health_reason
            outcome.pods[uuid] = _pods(uuid, samples)
        outcome.offer_changed |= offered != gpu.offered
    if events:
        GpuEvent.objects.bulk_create(events, ignore_conflicts=True)
    node_due = node.last_seen is None or now - node.last_seen >= LAST_SEEN_EVERY
    if node_due:
        node.last_seen = now
    _stamp_seen(node, seen, node_due=node_due)
    services.gpu_health_followup(
        node=node, failed=outcome.failed, pods=outcome.pods, offer_changed=outcome.offer_changed
    )
    return outcome
