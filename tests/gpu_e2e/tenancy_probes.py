"""T02 probes for the gpu routes (registered from tests/security/probes.py).

Nodes and GPUs are cluster inventory every signed-in user may list (no tenant's rows in them);
ingest answers only node tokens, so a user's session or personal token is refused and nothing is
written. The job telemetry socket of another project's job is refused (tests/gpu_e2e/test_job_telemetry.py).
"""

from __future__ import annotations

from typing import Any


def register_gpu_probes() -> None:
    from tests.security.probes import PROBES, WS_PROBES, Probe

    batch: dict[str, Any] = {"node": "gpu-node-0", "agent_version": "x", "samples": []}
    PROBES.update(
        {
            "GET /api/v1/nodes/": lambda v: [Probe("GET", "/api/v1/nodes/", "no_foreign_rows")],
            "GET /api/v1/nodes/{name}/": lambda v: [
                Probe("GET", "/api/v1/nodes/gpu-node-0/", "no_foreign_rows")
            ],
            "GET /api/v1/gpus/": lambda v: [Probe("GET", "/api/v1/gpus/", "no_foreign_rows")],
            "GET /api/v1/gpus/{uuid}/": lambda v: [Probe("GET", "/api/v1/gpus/GPU-x/", "no_foreign_rows")],
            "POST /api/v1/ingest/samples": lambda v: [
                Probe("POST", "/api/v1/ingest/samples", "denied", batch)
            ],
        }
    )
    WS_PROBES["ws/jobs/<uuid:uid>/telemetry/"] = lambda v: f"/ws/jobs/{v.extra['job'].uid}/telemetry/"
