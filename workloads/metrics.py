"""The workloads' Prometheus figures (queue, quota use, admissions and preemptions, reconcile lag,
watch relists), added to the registry /metrics serves (gpu/metrics.py: a token or an operator's
session). Database figures are read at scrape time; the controller's watch counts are shared totals
(gpu/counters.py) it adds every tick. Either way every web replica answers the same numbers."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpu import counters
from gpu.metrics import counter_family
from workloads import metrics_reads as reads
from workloads.controller import counts
from workloads.controller.watches import WATCH_SPECS

GAUGES = (
    "gpuportal_jobs",
    "gpuportal_queue_oldest_seconds",
    "gpuportal_quota_gpus_held",
    "gpuportal_quota_slices_held",
    "gpuportal_quota_gpus",
    "gpuportal_quota_gpus_held_by_type",
    "gpuportal_quota_gpu_type_limit",
    "gpuportal_outbox_depth",
    "gpuportal_outbox_oldest_seconds",
    "gpuportal_reconcile_pending",
    "gpuportal_reconcile_lag_seconds",
)
COUNTERS = (
    "gpuportal_job_transitions",
    "gpuportal_idle_warnings",
    "gpuportal_idle_reclaims",
    counts.RELISTS,
    counts.EXPIRED,
    counts.ERRORS,
)


class WorkloadsCollector(Collector):
    def describe(self) -> list[Metric]:
        """The names, without touching the database (registering calls this at start-up)."""
        return [*(GaugeMetricFamily(n, n) for n in GAUGES), *(CounterMetricFamily(n, "") for n in COUNTERS)]

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("gpuportal_jobs", "Jobs by project and state", labels=["project", "state"])
        for slug, state, n in reads.jobs_by_project_state():
            jobs.add_metric([slug, state], n)
        yield jobs
        age = GaugeMetricFamily(
            "gpuportal_queue_oldest_seconds", "Wait of the oldest queued job", labels=["project"]
        )
        for slug, seconds in reads.queue_oldest_age_s().items():
            age.add_metric([slug], seconds)
        yield age
        yield from self._quota()
        yield from self._quota_by_type()
        moves = CounterMetricFamily(
            "gpuportal_job_transitions", "Admissions and preemptions", labels=["project", "to_state"]
        )
        for slug, state, n in reads.transitions_total():
            moves.add_metric([slug, state], n)
        yield moves
        yield from self._idle()
        yield from self._reconcile()
        yield from self._watches()

    def _idle(self) -> Iterator[Metric]:
        warned = CounterMetricFamily("gpuportal_idle_warnings", "Idle-GPU warnings sent", labels=["project"])
        reclaims = CounterMetricFamily(
            "gpuportal_idle_reclaims", "Jobs suspended for idle GPUs", labels=["project"]
        )
        for slug, n_warned, n_suspended in reads.idle_totals():
            warned.add_metric([slug], n_warned)
            reclaims.add_metric([slug], n_suspended)
        yield from (warned, reclaims)

    def _quota(self) -> Iterator[Metric]:
        labels = ["project"]
        held = GaugeMetricFamily(
            "gpuportal_quota_gpus_held", "Whole GPUs held by running jobs", labels=labels
        )
        slices = GaugeMetricFamily(
            "gpuportal_quota_slices_held", "MPS slices held by running jobs", labels=labels
        )
        quota = GaugeMetricFamily("gpuportal_quota_gpus", "The project's GPU quota", labels=labels)
        for slug, gpus, mps, limit in reads.gpus_held_by_project():
            held.add_metric([slug], gpus)
            slices.add_metric([slug], mps)
            quota.add_metric([slug], limit)
        yield from (held, slices, quota)

    def _quota_by_type(self) -> Iterator[Metric]:
        labels = ["project", "gpu_type"]
        held = GaugeMetricFamily(
            "gpuportal_quota_gpus_held_by_type",
            "Whole GPUs held by running jobs, per GPU type",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            "gpuportal_quota_gpu_type_limit", "The project's limit for one GPU type", labels=labels
        )
        for slug, gpu_type, gpus, top in reads.gpus_held_by_type():
            held.add_metric([slug, gpu_type], gpus)
            if top is not None:
                limit.add_metric([slug, gpu_type], top)
        yield from (held, limit)

    def _reconcile(self) -> Iterator[Metric]:
        depth, oldest = reads.outbox_depth()
        yield GaugeMetricFamily("gpuportal_outbox_depth", "Reconcile requests not yet done", value=depth)
        yield GaugeMetricFamily(
            "gpuportal_outbox_oldest_seconds", "Age of the oldest pending reconcile request", value=oldest
        )
        pending = GaugeMetricFamily(
            "gpuportal_reconcile_pending",
            "Desired changes the cluster has not confirmed",
            labels=["project", "stage"],
        )
        lag: dict[str, float] = {}
        for slug, stage, n, age in reads.reconcile_pending():
            pending.add_metric([slug, stage], n)
            lag[slug] = max(lag.get(slug, 0.0), age)
        lags = GaugeMetricFamily(
            "gpuportal_reconcile_lag_seconds",
            "Age of the oldest unconfirmed desired change",
            labels=["project"],
        )
        for slug in sorted(lag):
            lags.add_metric([slug], lag[slug])
        yield from (pending, lags)

    def _watches(self) -> Iterator[Metric]:
        try:
            totals = counters.read()
        except counters.CountersUnavailable:
            return  # gpuportal_shared_counters_up says so
        kinds = [(factory().name,) for factory in WATCH_SPECS]
        yield counter_family(
            totals, counts.RELISTS, "Full lists by the controller's watches", ["kind"], kinds
        )
        yield counter_family(totals, counts.EXPIRED, "Watches expired (410 Gone)", ["kind"], kinds)
        yield counter_family(totals, counts.ERRORS, "Failed list or watch rounds", ["kind"], kinds)


_registered = False


def register() -> None:
    """Once per process (the app's ready()): the figures are read at scrape time, not counted here."""
    global _registered
    if not _registered:
        REGISTRY.register(WorkloadsCollector())
        _registered = True
