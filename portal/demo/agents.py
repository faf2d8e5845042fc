"""Simulated node agents for the demo: telemetry in the agent contract's shape whose numbers follow
the jobs the portal sees running on each node, posted to the real ingest endpoint with real node
tokens, so the cluster map, node pages and job panels come alive with no GPU.

    handle = start_sim_agents("http://127.0.0.1:8000", nodes=None)   # all mirrored GPU nodes
    ...
    handle.stop()

or `python -m portal.demo.agents --portal-url http://127.0.0.1:8000`. Samples are generated here
rather than by plugin/'s simulated NVML + agent, because attributing processes to pods needs a
kubelet PodResources socket that kwok nodes do not have; the samples are the contract's own Structs,
encoded as the agent encodes them (plugin/contract.py, docs/telemetry-contract.md).
"""

from __future__ import annotations

import logging
import random
import threading
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import msgspec
from django.db import close_old_connections

from gpu import services as gpu_services
from gpu.models import Node
from plugin.contract import INGEST_PATH, GpuSample, IngestBatch, ProcessSample
from workloads.choices import JobState
from workloads.models import Job

log = logging.getLogger(__name__)
MEMORY_MIB = 32 * 1024
_ENCODER = msgspec.json.Encoder()


@dataclass
class SimGpu:
    uuid: str
    util: float = 0.0
    procs: list[ProcessSample] = field(default_factory=list)
    xid: int | None = None  # reported once by the next sample (tests inject faults with it)


def gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{zlib.crc32(node.encode()):08x}-sim-{index:04d}"


def assign(jobs: list[Job], gpus: list[SimGpu]) -> None:
    """Place running jobs: whole GPUs from the first free one, MPS jobs together on the last free one
    (pure and deterministic, so the map shows the same picture on every tick)."""
    for gpu in gpus:
        gpu.procs = []
    free = list(range(len(gpus)))
    for job in jobs:
        pod = job.pod_name or f"{job.k8s_name}-sim"
        if job.gpus:
            wanted = [free.pop(0) for _ in range(min(job.gpus, len(free)))]
        else:
            wanted = [free[-1] if free else len(gpus) - 1]
        for index in wanted:
            share = (job.mps_slices or 4) / 8 if not job.gpus else 0.6
            gpus[index].procs.append(
                ProcessSample(
                    pid=1000 + zlib.crc32(pod.encode()) % 30000,
                    mem_used_mib=int(MEMORY_MIB * share * 0.8),
                    pod_uid=str(job.uid),
                    pod_namespace=job.namespace,
                    pod_name=pod,
                    container="main",
                )
            )


def sample(gpu: SimGpu, now: datetime, rng: random.Random) -> GpuSample[str]:
    target = 92.0 if gpu.procs else 1.0
    gpu.util = max(0.0, min(100.0, gpu.util + (target - gpu.util) * 0.3 + rng.uniform(-4, 4)))
    util = round(gpu.util)
    used = 300 + sum(p.mem_used_mib for p in gpu.procs)
    xid, gpu.xid = gpu.xid, None
    return GpuSample(
        gpu_uuid=gpu.uuid,
        ts=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        util_gpu=util,
        util_mem=util // 2,
        mem_used_mib=min(used, MEMORY_MIB),
        mem_total_mib=MEMORY_MIB,
        temp_c=round(34 + 0.45 * util + rng.uniform(-1, 1), 1),
        power_w=round(28 + 5.4 * util, 1),
        sm_clock_mhz=2407 if util > 5 else 210,
        mem_clock_mhz=14001 if util > 5 else 405,
        ecc_sbe=0,
        ecc_dbe=0,
        xid=xid,
        processes=list(gpu.procs),
    )


class SimAgents:
    """One thread posting one batch per node per interval, until `stop()`."""

    def __init__(self, portal_url: str, nodes: list[str] | None, *, interval_s: float = 1.0) -> None:
        self.url = portal_url.rstrip("/") + INGEST_PATH
        self.interval_s = interval_s
        self.rng = random.Random(7)  # noqa: S311 - simulated load, not security
        self._stop = threading.Event()
        self.tokens: dict[str, str] = {}
        self.gpus: dict[str, list[SimGpu]] = {}
        self.posted = 0
        self._setup(nodes)
        self.thread = threading.Thread(target=self._run, name="sim-agents", daemon=True)

    def _setup(self, names: list[str] | None) -> None:
        qs = Node.objects.filter(deleted=False)
        nodes = qs.filter(name__in=names) if names else qs.filter(gpu_count__gt=0)
        for node in nodes:
            _, self.tokens[node.name] = gpu_services.node_token_create(node=node, name="sim-agent")
            count = node.gpu_count or 4
            self.gpus[node.name] = [SimGpu(gpu_uuid(node.name, i)) for i in range(count)]

    def tick(self, client: httpx.Client) -> None:
        close_old_connections()
        now = datetime.now(UTC)
        for name, gpus in self.gpus.items():
            jobs = list(Job.objects.select_related("project").filter(node=name, state=JobState.RUNNING))
            assign(jobs, gpus)
            body = IngestBatch(
                node=name, agent_version="sim-1", samples=[sample(g, now, self.rng) for g in gpus]
            )
            headers = {"Authorization": f"Bearer {self.tokens[name]}", "Content-Type": "application/json"}
            try:
                response = client.post(self.url, content=_ENCODER.encode(body), headers=headers)
                self.posted += 1 if response.status_code == 200 else 0
            except httpx.HTTPError as exc:
                log.warning("sim agent %s: %s", name, exc)

    def _run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.is_set():
                self.tick(client)
                self._stop.wait(self.interval_s)

    def start(self) -> SimAgents:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)


def start_sim_agents(
    portal_url: str, nodes: list[str] | None = None, *, interval_s: float = 1.0
) -> SimAgents:
    """Start simulated agents for `nodes` (default: every mirrored node with GPUs); returns the handle."""
    return SimAgents(portal_url, nodes, interval_s=interval_s).start()


def main(argv: list[str] | None = None) -> int:
    """`python -m portal.demo.agents --portal-url URL [--node NAME ...]`: run until Ctrl-C."""
    import argparse
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    parser = argparse.ArgumentParser(prog="python -m portal.demo.agents")
    parser.add_argument("--portal-url", default="http://127.0.0.1:8000")
    parser.add_argument("--node", action="append", dest="nodes", help="only these nodes (repeatable)")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    agents = start_sim_agents(args.portal_url, args.nodes, interval_s=args.interval)
    log.warning("simulating %d node agent(s); Ctrl-C to stop", len(agents.gpus))
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        agents.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
