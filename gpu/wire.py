"""The node agents' ingest batch as msgspec types: decoded and range-checked in C, in one pass.

The shape is plugin/contract.py's (docs/telemetry-contract.md); the portal never imports plugin/, so
it is written out again here with the bounds the portal enforces. msgspec is strict the way the contract
is: no bool or float where an int is asked, no naive timestamp, no NaN, no missing field. Business rules
that depend on the clock or on settings (the accepted time window, UTC only, the batch size) are
checked by ingest after decoding. Unknown fields are ignored, so a newer agent can add some.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

Int = Annotated[int, Meta(ge=0, le=1 << 62)]
Percent = Annotated[int, Meta(ge=0, le=100)]
MiB = Annotated[int, Meta(ge=0, le=(1 << 31) - 1)]  # the column is a Postgres integer
Xid = Annotated[int, Meta(ge=0, le=(1 << 31) - 1)]
Mhz = Annotated[int, Meta(ge=0, le=100_000)]
Name = Annotated[str, Meta(max_length=253)] | None

MAX_PROCESSES = 256
_PATH = re.compile(r" - at `\$\.?(.*)`$")


class WireProcess(Struct, frozen=True):
    pid: Int
    mem_used_mib: Int
    pod_uid: Name = None
    pod_namespace: Name = None
    pod_name: Name = None
    container: Name = None


class WireSample(Struct, frozen=True):
    gpu_uuid: Annotated[str, Meta(min_length=1, max_length=64)]
    ts: Annotated[datetime, Meta(tz=True)]
    util_gpu: Percent
    util_mem: Percent
    mem_used_mib: MiB
    mem_total_mib: MiB
    temp_c: Annotated[float, Meta(ge=-100.0, le=200.0)]
    power_w: Annotated[float, Meta(ge=0.0, le=10_000.0)]
    sm_clock_mhz: Mhz
    mem_clock_mhz: Mhz
    ecc_sbe: Int
    ecc_dbe: Int
    processes: Annotated[list[WireProcess], Meta(max_length=MAX_PROCESSES)]
    xid: Xid | None = None


class WireBatch(Struct, frozen=True):
    node: Annotated[str, Meta(min_length=1, max_length=253)]
    samples: list[WireSample]
    agent_version: str = ""


_DECODER = msgspec.json.Decoder(WireBatch)


class NotJson(ValueError):
    """The body is not JSON at all."""


class WireError(ValueError):
    """Valid JSON of the wrong shape: `field` is the path (`samples[3].util_gpu`), '' for the body."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def read(raw: bytes | Any) -> WireBatch:
    """Decode a request body (bytes), or check an already parsed object (tests, tools)."""
    try:
        if isinstance(raw, bytes | bytearray | memoryview):
            return _DECODER.decode(raw)
        return msgspec.convert(raw, WireBatch)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _PATH.search(text)
        field = match.group(1) if match else ""
        raise WireError(field, text[: match.start()] if match else text) from None
    except msgspec.DecodeError:
        raise NotJson("The body is not valid JSON.") from None
