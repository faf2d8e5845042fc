"""Signals the gpu app sends for other apps to act on (gpu never imports workloads).

`gpu_failed`: a GPU just turned unhealthy (critical XID, double-bit ECC error, or an operator's
forced fault). Sent after commit with `node` (name), `gpu_uuid`, `reason` ("XID 79") and `pods`
(the (namespace, pod name) pairs its telemetry last attributed to it). workloads requeues the jobs.
"""

from __future__ import annotations

from django.dispatch import Signal

gpu_failed = Signal()
