"""One validated telemetry sample, the shape that ingest produces and health reads.

It lives apart from `gpu.ingest` (which parses and stores samples) and `gpu.health` (which turns them
into events) so that each of those imports it at module level without importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpu.messages import ProcessFrame


@dataclass(frozen=True)
class Sample:
    """One GPU's reading at `ts` (UTC). `values` holds the counters and gauges of the wire sample
    (util_gpu, util_mem, mem_used_mib, mem_total_mib, sm_clock_mhz, mem_clock_mhz, ecc_sbe, ecc_dbe
    as int; temp_c, power_w as float; xid as int or None), already range-checked by ingest."""

    uuid: str
    ts: datetime
    values: dict[str, Any]
    processes: list[ProcessFrame]
