"""The node agents' ingest batch as the portal reads it: decoded and range-checked in C, in one pass.

The shape and its bounds are declared once, in plugin/contract.py (docs/telemetry-contract.md); the
bounds are the contract's because the agent drops a refused batch and must keep to them too. What the
portal adds is how it reads the timestamp: an aware datetime (`Meta(tz=True)`: no naive timestamp).
msgspec is strict the way the contract is: no bool or float where an int is asked, no NaN, no missing
field. Business rules that depend on the clock or on settings (the accepted time window, UTC only,
the batch size) are checked by ingest after decoding. Unknown fields are ignored, so a newer agent
can add some.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from plugin.contract import GpuSample, IngestBatch

Timestamp = Annotated[datetime, Meta(tz=True)]
Batch = IngestBatch[Timestamp]
Sample = GpuSample[datetime]  # a sample as the portal reads it (health, peaks, storage, frames)

_DECODER = msgspec.json.Decoder(Batch)
_PATH = re.compile(r" - at `\$\.?(.*)`$")


class NotJson(ValueError):
    """The body is not JSON at all."""


class WireError(ValueError):
    """Valid JSON of the wrong shape: `field` is the path (`samples[3].util_gpu`), '' for the body."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def read(raw: bytes | Any) -> IngestBatch[datetime]:
    """Decode a request body (bytes), or check an already parsed object (tests, tools)."""
    try:
        if isinstance(raw, bytes | bytearray | memoryview):
            return _DECODER.decode(raw)
        return msgspec.convert(raw, Batch)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _PATH.search(text)
        field = match.group(1) if match else ""
        raise WireError(field, text[: match.start()] if match else text) from None
    except msgspec.DecodeError:
        raise NotJson("The body is not valid JSON.") from None
