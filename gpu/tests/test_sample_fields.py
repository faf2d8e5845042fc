"""Every field of the contract's sample (plugin/contract.py), declared once, reaches every place derived
from it: the portal's decoder, the stored row and the real table's columns, the model that reads them,
the live frame (from ingest and from a stored row alike) and the contract's document."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from django.db import connection
from msgspec import inspect

from gpu import selectors, storage, wire
from gpu.frames import frame
from gpu.models import GpuSample as StoredSample
from gpu.tests.factories import make_gpus, make_node
from plugin.contract import GpuSample, IngestBatch, ProcessSample

pytestmark = pytest.mark.django_db
DOC = Path(__file__).resolve().parents[2] / "docs" / "telemetry-contract.md"


def _fields(struct: type[msgspec.Struct]) -> list[inspect.Field]:
    return list(cast("inspect.StructType", inspect.type_info(struct)).fields)


def _example(t: inspect.Type, *, stamp: str) -> Any:
    """A value of the field's type within its bounds, never its default (None or empty)."""
    if isinstance(t, inspect.UnionType):
        (t,) = [member for member in t.types if not isinstance(member, inspect.NoneType)]
    if isinstance(t, inspect.IntType):
        return min(t.le if t.le is not None else 1 << 40, 77)
    if isinstance(t, inspect.FloatType):
        return 42.5  # exact as a Postgres real too
    if isinstance(t, inspect.StrType):
        return "GPU-field-walk"[: t.max_length]
    if isinstance(t, inspect.DateTimeType):  # the portal reads the agent's text as a datetime
        return stamp
    if isinstance(t, inspect.ListType):
        return [_example(t.item_type, stamp=stamp)]
    if isinstance(t, inspect.StructType):
        return t.cls(**{f.name: _example(f.type, stamp=stamp) for f in t.fields})
    raise AssertionError(f"no example value for {t}: extend _example")


def _agents_sample(uuid: str, now: datetime) -> GpuSample[str]:
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    fields = {f.name: _example(f.type, stamp=stamp) for f in _fields(GpuSample[datetime])}
    return GpuSample(**{**fields, "gpu_uuid": uuid})


def _table_columns() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = 'gpu_sample'::regclass AND a.attnum > 0 AND NOT a.attisdropped"
        )
        return {str(name): str(kind) for name, kind in cursor.fetchall()}


def test_the_stored_columns_are_the_tables() -> None:
    """The migrations made the table; the declaration derives the COPY's columns and binary types."""
    assert dict(zip(storage.COLUMNS, storage.TYPES, strict=True)) == _table_columns()
    assert {f.column for f in StoredSample._meta.concrete_fields} == set(storage.COLUMNS)


def test_every_field_goes_through_decoder_row_table_and_frames() -> None:
    (gpu,) = make_gpus(make_node(), 1)
    now = datetime.now(UTC).replace(microsecond=123000)
    sent = _agents_sample(gpu.uuid, now)
    body = msgspec.json.encode(IngestBatch(node=gpu.node.name, samples=[sent]))
    (decoded,) = wire.read(body).samples
    names = [f.name for f in _fields(GpuSample[str])]
    process_names = {f.name for f in _fields(ProcessSample)}

    as_json = msgspec.to_builtins(sent)
    assert msgspec.to_builtins(decoded) == {**as_json, "ts": now.isoformat().replace("+00:00", "Z")}
    assert all(getattr(decoded, name) is not None for name in names)

    row = storage.row(gpu.pk, decoded)
    stored = dict(zip(storage.COLUMNS, row, strict=True))
    assert set(storage.COLUMNS) == {"gpu_id", *names} - {"gpu_uuid"}
    for name in storage.JSON_COLUMNS:
        stored[name] = msgspec.json.decode(stored[name])
    assert {name: msgspec.to_builtins(stored[name]) for name in names if name != "gpu_uuid"} == {
        name: msgspec.to_builtins(getattr(decoded, name)) for name in names if name != "gpu_uuid"
    }

    assert storage.store().write([row]) == 1
    live = frame(decoded, gpu.frame_facts(gpu.node.name))
    first_paint = selectors.latest_frames(gpus=[gpu], now=now)[gpu.uuid]
    portals = {"uuid", "node", "index", "health", "sharing_mode", "in_service"}
    assert set(live) == portals | set(names) - {"gpu_uuid"}
    assert set(live["processes"][0]) == process_names
    assert first_paint == live


def test_the_contract_document_names_every_field() -> None:
    table = re.findall(r"^\| (.+?) \|", DOC.read_text(), flags=re.MULTILINE)
    named = {name for cell in table for name in re.findall(r"`(?:processes\[\]\.)?([a-z_]+)`", cell)}
    fields = {f.name for struct in (IngestBatch[str], GpuSample[str], ProcessSample) for f in _fields(struct)}
    assert fields - named == set()
    assert "plugin/contract.py" in DOC.read_text()
