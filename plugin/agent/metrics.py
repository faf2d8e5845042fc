"""Prometheus /metrics with DCGM-exporter metric names where they match, so dashboards carry over."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from plugin.agent.sender import SampleBuffer
from plugin.contract import GpuSample

GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")
# DCGM name -> (sample field, help)
DCGM_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_gpu", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("util_mem", "Memory utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("mem_used_mib", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", "Power draw (in W)."),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_sbe", "Total number of single-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_dbe", "Total number of double-bit volatile ECC errors."),
}


class AgentMetrics:
    """Built from the latest poll when Prometheus scrapes, not on every poll: setting ten labelled
    gauges per GPU each second cost the agent twice its NVML calls (measured on a real H200)."""

    def __init__(self, hostname: str, names: list[str]) -> None:
        self.registry = CollectorRegistry()
        self.hostname = hostname
        self.names = names
        self._latest: tuple[dict[str, int], list[GpuSample[str]]] = ({}, [])
        self._last_xid: dict[str, int] = {}  # the last XID per GPU stays shown, as in dcgm-exporter
        self._buffer: SampleBuffer | None = None
        self.registry.register(self)

    def update(self, index_of: dict[str, int], samples: list[GpuSample[str]], buffer: SampleBuffer) -> None:
        self._latest = (index_of, samples)
        self._buffer = buffer
        for s in samples:
            if s.xid is not None:
                self._last_xid[s.gpu_uuid] = s.xid

    def collect(self) -> Iterator[Metric]:
        index_of, samples = self._latest
        families = {m: GaugeMetricFamily(m, h, labels=GPU_LABELS) for m, (_, h) in DCGM_FIELDS.items()}
        fb_free = GaugeMetricFamily(
            "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=GPU_LABELS
        )
        xid = GaugeMetricFamily(
            "DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", labels=GPU_LABELS
        )
        pod_mem: Counter[tuple[str, str, str, str]] = Counter()
        for s in samples:
            i = index_of[s.gpu_uuid]
            labels = [str(i), s.gpu_uuid, f"nvidia{i}", self.names[i], self.hostname]
            for metric, (field, _) in DCGM_FIELDS.items():
                families[metric].add_metric(labels, float(getattr(s, field)))
            fb_free.add_metric(labels, s.mem_total_mib - s.mem_used_mib)
            if s.gpu_uuid in self._last_xid:
                xid.add_metric(labels, self._last_xid[s.gpu_uuid])
            for p in s.processes:
                if p.pod_name:
                    key = (s.gpu_uuid, p.pod_namespace or "", p.pod_name, p.container or "")
                    pod_mem[key] += p.mem_used_mib
        yield from families.values()
        yield fb_free
        yield xid
        yield self._pod_memory(pod_mem)
        yield from self._buffer_metrics()

    @staticmethod
    def _pod_memory(pod_mem: Counter[tuple[str, str, str, str]]) -> Metric:
        family = GaugeMetricFamily(
            "gpu_portal_pod_gpu_memory_used_mib",
            "GPU memory used by a pod's processes (MiB).",
            labels=("UUID", "namespace", "pod", "container"),
        )
        for key, mib in sorted(pod_mem.items()):
            family.add_metric(list(key), mib)
        return family

    def _buffer_metrics(self) -> Iterator[Metric]:
        buffered, dropped = (len(self._buffer), self._buffer.dropped) if self._buffer else (0, 0)
        yield GaugeMetricFamily(
            "gpu_portal_agent_buffered_samples", "Samples waiting for the portal.", value=buffered
        )
        yield CounterMetricFamily(
            "gpu_portal_agent_dropped_samples", "Samples dropped (buffer full).", value=dropped
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - scraped from the pod network
        start_http_server(port, addr=addr, registry=self.registry)
