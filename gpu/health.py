"""GPU health from telemetry: XIDs and ECC counters become GpuEvents and move `Gpu.health`.

Runs inside the ingest transaction. Idempotent for a retried batch: events are unique per
(GPU, kind, ts) and ECC events fire only when a counter rises above the stored one. `last_seen`
is written at most every LAST_SEEN_EVERY per GPU, so 1 Hz telemetry does not mean 1 Hz UPDATEs.
Telemetry only ever worsens health: returning a GPU to service after a clean interval is not
automated here, an operator does it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from gpu.choices import APPLICATION_XIDS, GpuEventKind, GpuHealth
from gpu.models import Gpu, GpuEvent, Node
from gpu.samples import Sample

LAST_SEEN_EVERY = timedelta(seconds=10)
SEVERITY = {GpuHealth.UNKNOWN: 0, GpuHealth.HEALTHY: 1, GpuHealth.DEGRADED: 2, GpuHealth.UNHEALTHY: 3}


def _xid_events(gpus: dict[str, Gpu], samples: list[Sample]) -> tuple[list[GpuEvent], set[str]]:
    events, critical = [], set()
    for s in samples:
        xid = s.values["xid"]
        if xid is None:
            continue
        kind = "application" if xid in APPLICATION_XIDS else "critical"
        events.append(
            GpuEvent(gpu=gpus[s.uuid], kind=GpuEventKind.XID, ts=s.ts, xid=xid, message=f"XID {xid} ({kind})")
        )
        if xid not in APPLICATION_XIDS:
            critical.add(s.uuid)
    return events, critical


def _ecc_events(gpu: Gpu, s: Sample) -> tuple[list[GpuEvent], GpuHealth | None]:
    events: list[GpuEvent] = []
    worst: GpuHealth | None = None
    sbe, dbe = s.values["ecc_sbe"], s.values["ecc_dbe"]
    if dbe > gpu.ecc_dbe:
        events.append(GpuEvent(gpu=gpu, kind=GpuEventKind.ECC_DBE, ts=s.ts, value=dbe - gpu.ecc_dbe))
        worst = GpuHealth.UNHEALTHY
    if sbe > gpu.ecc_sbe:
        events.append(GpuEvent(gpu=gpu, kind=GpuEventKind.ECC_SBE, ts=s.ts, value=sbe - gpu.ecc_sbe))
        worst = worst or GpuHealth.DEGRADED
    return events, worst


def next_health(current: str, observed: GpuHealth | None) -> str:
    """Health only worsens from telemetry; a first clean sample turns UNKNOWN into HEALTHY."""
    if observed is None:
        return GpuHealth.HEALTHY if current == GpuHealth.UNKNOWN else current
    return observed if SEVERITY[observed] > SEVERITY[GpuHealth(current)] else current


def _update_gpu(gpu: Gpu, s: Sample, observed: GpuHealth | None, events: list[GpuEvent]) -> bool:
    """Save health/ECC changes at once; return True when only `last_seen` is due (batched by caller)."""
    fields = []
    health = next_health(gpu.health, observed)
    if health != gpu.health:
        events.append(
            GpuEvent(gpu=gpu, kind=GpuEventKind.HEALTH, ts=s.ts, message=f"{gpu.health} -> {health}")
        )
        gpu.health = health
        fields.append("health")
    if (s.values["ecc_sbe"], s.values["ecc_dbe"]) != (gpu.ecc_sbe, gpu.ecc_dbe):
        gpu.ecc_sbe, gpu.ecc_dbe = s.values["ecc_sbe"], s.values["ecc_dbe"]
        fields += ["ecc_sbe", "ecc_dbe"]
    due = gpu.last_seen is None or s.ts - gpu.last_seen >= LAST_SEEN_EVERY
    if due or fields:
        gpu.last_seen = max(s.ts, gpu.last_seen) if gpu.last_seen else s.ts
    if fields:
        gpu.save(update_fields=[*fields, "last_seen"])
        return False
    return due


def record(
    *, node: Node, gpus: dict[str, Gpu], samples: list[Sample], latest: dict[str, Sample], now: datetime
) -> None:
    events, critical = _xid_events(gpus, samples)
    seen: list[Gpu] = []
    for uuid, s in latest.items():
        gpu = gpus[uuid]
        ecc, observed = _ecc_events(gpu, s)
        events += ecc
        if uuid in critical:
            observed = GpuHealth.UNHEALTHY
        if _update_gpu(gpu, s, observed, events):
            seen.append(gpu)
    if seen:  # one UPDATE for all GPUs whose last_seen is due (they reported in the same batch)
        Gpu.objects.filter(pk__in=[g.pk for g in seen]).update(
            last_seen=max(g.last_seen for g in seen if g.last_seen)
        )
    if events:
        GpuEvent.objects.bulk_create(events, ignore_conflicts=True)
    if node.last_seen is None or now - node.last_seen >= LAST_SEEN_EVERY:
        node.last_seen = now
        node.save(update_fields=["last_seen"])
