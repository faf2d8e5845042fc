"""Prometheus /metrics with DCGM-exporter metric names where they match, so dashboards carry over."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

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
    def __init__(self, hostname: str, names: list[str]) -> None:
        self.registry = CollectorRegistry()
        self.hostname = hostname
        self.names = names
        self.gauges = {
            m: Gauge(m, h, GPU_LABELS, registry=self.registry) for m, (_, h) in DCGM_FIELDS.items()
        }
        self.fb_free = Gauge(
            "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", GPU_LABELS, registry=self.registry
        )
        self.xid = Gauge(
            "DCGM_FI_DEV_XID_ERRORS",
            "Value of the last XID error encountered.",
            GPU_LABELS,
            registry=self.registry,
        )
        self.pod_mem = Gauge(
            "gpu_portal_pod_gpu_memory_used_mib",
            "GPU memory used by a pod's processes (MiB).",
            ("UUID", "namespace", "pod", "container"),
            registry=self.registry,
        )
        self.buffered = Gauge(
            "gpu_portal_agent_buffered_samples", "Samples waiting for the portal.", registry=self.registry
        )
        self.dropped = Counter(
            "gpu_portal_agent_dropped_samples", "Samples dropped (buffer full).", registry=self.registry
        )
        self._dropped_seen = 0

    def update(self, index_of: dict[str, int], samples: list[GpuSample], buffer: SampleBuffer) -> None:
        self.pod_mem.clear()  # pods come and go; stale series would lie
        for s in samples:
            i = index_of[s["gpu_uuid"]]
            labels = (str(i), s["gpu_uuid"], f"nvidia{i}", self.names[i], self.hostname)
            for metric, (field, _) in DCGM_FIELDS.items():
                self.gauges[metric].labels(*labels).set(float(s[field]))  # type: ignore[literal-required]
            self.fb_free.labels(*labels).set(s["mem_total_mib"] - s["mem_used_mib"])
            if s["xid"] is not None:
                self.xid.labels(*labels).set(s["xid"])
            for p in s["processes"]:
                if p["pod_name"]:
                    key = (s["gpu_uuid"], p["pod_namespace"] or "", p["pod_name"], p["container"] or "")
                    self.pod_mem.labels(*key).inc(p["mem_used_mib"])
        self.buffered.set(len(buffer))
        self.dropped.inc(buffer.dropped - self._dropped_seen)
        self._dropped_seen = buffer.dropped

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - scraped from the pod network
        start_http_server(port, addr=addr, registry=self.registry)
