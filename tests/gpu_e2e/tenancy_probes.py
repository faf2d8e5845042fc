"""Cross-tenant probes for the gpu routes (registered from tests/security/probes.py).

Nodes and GPUs are cluster inventory every signed-in user may list (no tenant's rows in them);
ingest answers only node tokens, so a user's session or personal token is refused and nothing is
written. The job telemetry socket of another project's job is refused (tests/gpu_e2e/test_job_telemetry.py).
"""

from __future__ import annotations

from typing import Any


def _victim_node(victim: Any) -> None:
    """A node with a GPU the victim's job uses, so the node and GPU probes ask for real objects."""
    from gpu.models import Gpu, Node

    node, _ = Node.objects.get_or_create(name=f"victim-node-{victim.project.slug}", defaults={"gpu_count": 1})
    gpu, _ = Gpu.objects.get_or_create(
        node=node, index=0, defaults={"uuid": f"GPU-victim-{victim.project.slug}", "memory_mib": 32768}
    )
    victim.extra.update(node=node, gpu=gpu)


def register_gpu_probes() -> None:
    from tests.security.probes import PROBES, VICTIM_SETUP, WS_PROBES, WS_REFUSED, Probe

    batch: dict[str, Any] = {"node": "gpu-node-0", "agent_version": "x", "samples": []}
    PROBES.update(
        {
            "GET /api/v1/nodes/": lambda v: [Probe("GET", "/api/v1/nodes/", "no_foreign_rows")],
            "GET /api/v1/nodes/{name}/": lambda v: [
                Probe("GET", f"/api/v1/nodes/{v.extra['node'].name}/", "no_foreign_rows")
            ],
            "GET /api/v1/gpus/": lambda v: [Probe("GET", "/api/v1/gpus/", "no_foreign_rows")],
            "GET /api/v1/gpus/{uuid}/": lambda v: [
                Probe("GET", f"/api/v1/gpus/{v.extra['gpu'].uuid}/", "no_foreign_rows")
            ],
            "POST /api/v1/ingest/samples": lambda v: [
                Probe("POST", "/api/v1/ingest/samples", "denied", batch)
            ],
        }
    )
    WS_PROBES["ws/jobs/<uuid:uid>/telemetry/"] = lambda v: f"/ws/jobs/{v.extra['job'].uid}/telemetry/"
    WS_REFUSED.add("ws/jobs/<uuid:uid>/telemetry/")
    # Cluster inventory every signed-in user may watch: open, but other tenants' processes redacted.
    WS_PROBES["ws/cluster/"] = lambda v: "/ws/cluster/"
    WS_PROBES["ws/nodes/<str:name>/"] = lambda v: f"/ws/nodes/{v.extra['node'].name}/"
    if _victim_node not in VICTIM_SETUP:
        VICTIM_SETUP.append(_victim_node)
