"""The workloads' Prometheus figures (queue, quota use, admissions and preemptions, outbox), added
to the registry /metrics serves (gpu/metrics.py: a token or an operator's session)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from workloads import metrics_reads as reads


class WorkloadsCollector(Collector):
    def describe(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
        """The names, without touching the database (registering calls this at start-up)."""
        names = ("gpuportal_jobs", "gpuportal_queue_oldest_seconds", "gpuportal_quota_gpus_held",
                 "gpuportal_quota_slices_held", "gpuportal_quota_gpus", "gpuportal_outbox_depth",
                 "gpuportal_outbox_oldest_seconds")  # fmt: skip
        return [
            *(GaugeMetricFamily(n, n) for n in names),
            CounterMetricFamily("gpuportal_job_transitions", ""),
            CounterMetricFamily("gpuportal_idle_warnings", ""),
            CounterMetricFamily("gpuportal_idle_reclaims", ""),
        ]

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
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
        moves = CounterMetricFamily(
            "gpuportal_job_transitions", "Admissions and preemptions", labels=["project", "to_state"]
        )
        for slug, state, n in reads.transitions_total():
            moves.add_metric([slug, state], n)
        yield moves
        yield from self._idle()
        depth, oldest = reads.outbox_depth()
        yield GaugeMetricFamily("gpuportal_outbox_depth", "Reconcile requests not yet done", value=depth)
        yield GaugeMetricFamily(
            "gpuportal_outbox_oldest_seconds", "Age of the oldest pending reconcile request", value=oldest
        )

    def _idle(self) -> Iterator[CounterMetricFamily]:
        warned = CounterMetricFamily("gpuportal_idle_warnings", "Idle-GPU warnings sent", labels=["project"])
        reclaims = CounterMetricFamily(
            "gpuportal_idle_reclaims", "Jobs suspended for idle GPUs", labels=["project"]
        )
        for slug, n_warned, n_suspended in reads.idle_totals():
            warned.add_metric([slug], n_warned)
            reclaims.add_metric([slug], n_suspended)
        yield from (warned, reclaims)

    def _quota(self) -> Iterator[GaugeMetricFamily]:
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


_registered = False


def register() -> None:
    """Once per process (the app's ready()): the figures are read at scrape time, not counted here."""
    global _registered
    if not _registered:
        REGISTRY.register(WorkloadsCollector())
        _registered = True
