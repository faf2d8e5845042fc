"""A job's GPU peaks and busy time, from the per-pod readings of one ingest batch.

A reading belongs to a job when its pod is one of the job's (`job-<uid>-…`, the Kubernetes Job's pod
names, or the simulated agents' `job-<uid>-sim`) and sits in the job's project namespace; anything
else (a notebook, another tenant's pod claiming a name) is ignored. One SELECT (the jobs, locked)
and one UPDATE per batch, however many samples: peaks rise with GREATEST, and busy seconds count
only samples newer than the job's `telemetry_until`, so a retried batch adds nothing twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models, transaction
from django.db.models import Case, F, Value, When
from django.db.models.functions import Coalesce, Greatest

from gpu.peaks import PodReading
from workloads import app_settings
from workloads.models import Job

POD_RE = re.compile(r"^job-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-")


@dataclass(frozen=True)
class Figures:
    """What one batch says of one job."""

    mem: int
    sm: int
    total: int
    busy: float
    until: datetime


def by_job(readings: Sequence[PodReading]) -> dict[str, list[PodReading]]:
    """Readings grouped by the job uid their pod name carries (pure)."""
    out: dict[str, list[PodReading]] = {}
    for r in readings:
        if match := POD_RE.match(r.pod):
            out.setdefault(match.group(1), []).append(r)
    return out


def figures(readings: Sequence[PodReading], *, since: datetime | None, busy_pct: int) -> Figures:
    """Peaks over all readings; busy seconds over those newer than `since` only (pure)."""
    busy = sum(r.interval_s for r in readings if r.util_gpu >= busy_pct and (since is None or r.ts > since))
    return Figures(
        mem=max(r.mem_mib for r in readings),
        sm=max(r.util_gpu for r in readings),
        total=max(r.mem_total_mib for r in readings),
        busy=busy,
        until=max(r.ts for r in readings),
    )


def _case(values: dict[int, Any], field: models.Field[Any, Any]) -> Case:
    return Case(*[When(pk=pk, then=Value(v)) for pk, v in values.items()], output_field=field)


def record_readings(*, readings: Sequence[PodReading]) -> int:
    """Raise the peaks and add the busy time of the jobs these readings belong to; how many jobs."""
    grouped = by_job(readings)
    if not grouped:
        return 0
    # savepoint=False: inside ingest's transaction this adds no round trip; alone, the lock needs one.
    with transaction.atomic(savepoint=False):
        return _record(grouped)


def _record(grouped: dict[str, list[PodReading]]) -> int:
    rows = (
        Job.objects.select_for_update(of=("self",))
        .filter(uid__in=list(grouped))
        .values_list("pk", "uid", "project__slug", "telemetry_until")
    )
    busy_pct, prefix = app_settings.busy_sm_pct(), app_settings.namespace_prefix()
    found: dict[int, Figures] = {}
    for pk, uid, slug, until in rows:
        own = [r for r in grouped[str(uid)] if r.namespace == f"{prefix}{slug}"]  # Project.namespace
        if own:
            found[pk] = figures(own, since=until, busy_pct=busy_pct)
    if not found:
        return 0
    return _update(found)


def _update(found: dict[int, Figures]) -> int:
    def case(attr: str, field: models.Field[Any, Any]) -> Case:
        return _case({pk: getattr(f, attr) for pk, f in found.items()}, field)

    until = case("until", models.DateTimeField())
    return Job.objects.filter(pk__in=list(found)).update(
        peak_gpu_mem_mib=Greatest(Coalesce(F("peak_gpu_mem_mib"), 0), case("mem", models.IntegerField())),
        peak_sm_pct=Greatest(Coalesce(F("peak_sm_pct"), 0), case("sm", models.IntegerField())),
        gpu_mem_total_mib=Greatest(Coalesce(F("gpu_mem_total_mib"), 0), case("total", models.IntegerField())),
        busy_gpu_seconds=F("busy_gpu_seconds") + case("busy", models.FloatField()),
        telemetry_until=Greatest(Coalesce(F("telemetry_until"), until), until),
    )
