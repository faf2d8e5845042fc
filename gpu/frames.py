"""A GPU's live frame: the contract's sample (plugin/contract.py) plus what the portal knows of the GPU.

Derived from the sample's declaration: every field but the agent's `gpu_uuid`, under its own name and
as msgspec writes it to JSON (`ts` RFC 3339 text, `processes` a list of objects), which the browser
reads as-is (gpu/static/); then the portal's facts about the GPU (gpu/messages.py: GpuFacts). Ingest
builds one from a decoded sample, the pages' first paint (gpu/selectors.py) from a stored row's fields:
the same keys. No Django here: the push benchmark's bare fan-out builds its frames with it too.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec

from gpu.messages import GpuFacts, GpuFrame
from plugin.contract import GpuSample


def frame(sample: GpuSample[Any] | dict[str, Any], facts: GpuFacts) -> GpuFrame:
    """`sample`: a sample, or its fields by name (a stored row's, its lists decoded)."""
    values = msgspec.to_builtins(sample)
    values.pop("gpu_uuid", None)
    return cast("GpuFrame", {**facts, **values})
