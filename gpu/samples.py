"""One validated telemetry sample, the shape that ingest produces and health and peaks read.

It is the wire struct itself (gpu/wire.py: decoded and range-checked by msgspec in C), read by
attribute. Ingest used to copy each sample into a dataclass of dicts first; that copy was a third of
its Python time per batch (B6, py-spy) and bought nothing. It lives apart from `gpu.ingest` and
`gpu.health` so that each of those imports it at module level without importing the other.
"""

from __future__ import annotations

from gpu.wire import WireProcess as Process
from gpu.wire import WireSample as Sample

__all__ = ["Process", "Sample"]
