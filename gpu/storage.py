"""Raw sample storage, chosen by database vendor; both backends offer the same small interface.

Postgres (production): `gpu_sample` is range-partitioned by day. A batch is COPYed (psycopg 3, binary
format) straight into it; a retried batch, which meets the (gpu, ts) key, goes through a session temp table
and one `INSERT ... SELECT ... ON CONFLICT DO NOTHING` instead, so it stores only its new rows. No
row-by-row ORM insert is ever made. Retention drops whole partitions. SQLite (the embedded demo):
one plain table, `INSERT OR IGNORE`, retention by DELETE.
Both are called inside the ingest transaction, so a failed batch leaves nothing behind.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from operator import attrgetter
from typing import Any, Protocol, cast

import msgspec
from django.db import DatabaseError, connection, transaction
from msgspec import inspect
from psycopg import adapt, postgres
from psycopg.errors import CheckViolation, UniqueViolation
from psycopg.pq import Format

from plugin.contract import GpuSample

# The stored row is the contract's sample (plugin/contract.py), derived from its declaration: the GPU's
# row id in place of its UUID, then every other field under its own name, its lists (the processes)
# last, as JSON. The table is the migrations' (0002); gpu/tests/test_sample_fields.py reads its columns
# from Postgres and fails when they and these disagree.
_FIELD_TYPES = {
    field.name: field.type
    for field in cast("inspect.StructType", inspect.type_info(GpuSample[datetime])).fields
    if field.name != "gpu_uuid"
}
_SCALARS = [name for name, t in _FIELD_TYPES.items() if not isinstance(t, inspect.ListType)]
JSON_COLUMNS = [name for name, t in _FIELD_TYPES.items() if isinstance(t, inspect.ListType)]
COLUMNS = ("gpu_id", *_SCALARS, *JSON_COLUMNS)
SampleRow = tuple[Any, ...]  # values in COLUMNS order (row() makes one)


def _pg_type(t: inspect.Type) -> str:
    """A field's column type: an int the smallest Postgres integer that holds its bound, a float a
    real (NVML reads no more precision), a list JSON."""
    if isinstance(t, inspect.UnionType):  # `x | None`: a NULL column of x's type
        (t,) = [member for member in t.types if not isinstance(member, inspect.NoneType)]
    if isinstance(t, inspect.IntType):
        top = t.le if t.le is not None else 1 << 63
        return "int2" if top < 1 << 15 else "int4" if top < 1 << 31 else "int8"
    by_kind = {
        inspect.FloatType: "float4",
        inspect.DateTimeType: "timestamptz",
        inspect.ListType: "jsonb",
        inspect.StrType: "text",
        inspect.BoolType: "bool",
    }
    return by_kind[type(t)]


# The columns' types for a binary COPY: Postgres then reads each value as it is stored, where a text
# COPY parsed every timestamp and number (the same batches took 40 % less time).
TYPES = ("int8", *(_pg_type(_FIELD_TYPES[name]) for name in COLUMNS[1:]))
_COLS = ", ".join(COLUMNS)
_TS = COLUMNS.index("ts")  # the partition key
_SCALAR_VALUES = attrgetter(*_SCALARS)
_ENCODER = msgspec.json.Encoder()


def row(gpu_id: int, sample: GpuSample[datetime]) -> SampleRow:
    """The stored row of a decoded sample: its lists encoded once, in C (every field the agent sent),
    NULL when empty."""
    lists = [getattr(sample, name) for name in JSON_COLUMNS]
    return (gpu_id, *_SCALAR_VALUES(sample), *[_ENCODER.encode(v) if v else None for v in lists])


class _JsonText(adapt.Dumper):
    """jsonb in binary: a version byte, then the JSON text as encoded once by ingest (psycopg's own
    jsonb dumper would encode the bytes again, as a JSON string)."""

    format = Format.BINARY
    oid = postgres.types["jsonb"].oid

    def dump(self, obj: Any) -> bytes:
        return b"\x01" + bytes(obj)


PARTITION_RE = re.compile(r"^gpu_sample_p(\d{8})$")


def partition_name(day: date) -> str:
    return f"gpu_sample_p{day:%Y%m%d}"


class SampleStore(Protocol):
    def write(self, rows: Sequence[SampleRow]) -> int:
        """Insert rows not already stored; return how many were new."""

    def ensure_partitions(self, *, start: date, days: int) -> list[str]:
        """Make sure storage exists for `days` days from `start`; return what was created."""

    def drop_before(self, *, day: date) -> list[str]:
        """Remove all samples older than `day`; return the partitions (or ranges) removed."""

    def partitions(self) -> list[str]:
        """The daily partitions present, oldest first."""


class PostgresStore:
    """Daily range partitions; see the module docstring for the write path."""

    def write(self, rows: Sequence[SampleRow]) -> int:
        if not rows:
            return 0
        refused = self._copy_new(rows)
        if isinstance(refused, CheckViolation):  # no partition for a day of the batch (a new day, a backlog)
            self._ensure_days({row[_TS].date() for row in rows})
            refused = self._copy_new(rows)
        if refused is None:
            return len(rows)
        # A retried batch met the (gpu, ts) key: store only its new rows. The COPY stopped before
        # seeing them all, so their days may still lack a partition.
        self._ensure_days({row[_TS].date() for row in rows})
        return self._merge(rows)

    def _copy_new(self, rows: Sequence[SampleRow]) -> Exception | None:
        """COPY straight into the table, the common case: as fast as Postgres takes rows. Returns the
        refusal (a duplicate key, or a day without partition) instead of raising it: raised through an
        atomic block it would doom the caller's transaction. The savepoint is set by hand and never
        released (COMMIT ends it): Django's atomic() sent a RELEASE per batch."""
        with transaction.atomic(savepoint=False), connection.cursor() as cursor:
            cursor.execute("SAVEPOINT gpu_sample_copy")
            try:
                self._copy(cursor, "gpu_sample", rows)
            except (UniqueViolation, CheckViolation) as exc:  # psycopg's own copy: Django never saw it
                cursor.execute("ROLLBACK TO SAVEPOINT gpu_sample_copy")
                return exc
        return None

    def _merge(self, rows: Sequence[SampleRow]) -> int:
        """COPY into a session temp table, then one INSERT ... ON CONFLICT DO NOTHING: the new rows only."""
        # savepoint=False: a failure aborts the caller's transaction, which is what ingest wants anyway.
        with transaction.atomic(savepoint=False), connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS gpu_sample_in (LIKE gpu_sample) ON COMMIT DELETE ROWS; "
                "DELETE FROM gpu_sample_in"
            )
            self._copy(cursor, "gpu_sample_in", rows)
            cursor.execute(
                f"INSERT INTO gpu_sample ({_COLS}) SELECT {_COLS} FROM gpu_sample_in "  # noqa: S608
                "ON CONFLICT DO NOTHING"
            )
            accepted: int = cursor.rowcount
        return accepted

    @staticmethod
    def _copy(cursor: Any, table: str, rows: Sequence[SampleRow]) -> None:
        raw = cursor.cursor
        raw.adapters.register_dumper(None, _JsonText)  # this cursor only: found by the jsonb oid below
        with raw.copy(f"COPY {table} ({_COLS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(TYPES))
            for row in rows:
                copy.write_row(row)

    def _ensure_days(self, days: set[date]) -> None:
        # Only after a COPY found no partition; no process-local cache: a cache would lie after a
        # rollback or after another process dropped a partition.
        names = {partition_name(day): day for day in days}
        with connection.cursor() as cursor:
            cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", [list(names)])
            present = {str(row[0]) for row in cursor.fetchall()}
        for name in sorted(set(names) - present):
            self._create(names[name])

    def _create(self, day: date) -> bool:
        name = partition_name(day)
        if name in self.partitions():
            return False
        sql = (
            f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF gpu_sample "
            f"FOR VALUES FROM ('{day.isoformat()} 00:00:00+00') TO ('{day + timedelta(days=1)} 00:00:00+00')"
        )
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql)
        except DatabaseError:
            return False  # another process created it between our check and our CREATE
        return True

    def ensure_partitions(self, *, start: date, days: int) -> list[str]:
        wanted = [start + timedelta(days=i) for i in range(days)]
        return [partition_name(day) for day in wanted if self._create(day)]

    def drop_before(self, *, day: date) -> list[str]:
        dropped = []
        for name in self.partitions():
            match = PARTITION_RE.match(name)
            if match and datetime.strptime(match.group(1), "%Y%m%d").date() < day:  # noqa: DTZ007
                with connection.cursor() as cursor:
                    cursor.execute(f"DROP TABLE IF EXISTS {name}")
                dropped.append(name)
        return dropped

    def partitions(self) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'gpu_sample' ORDER BY 1"
            )
            return [str(row[0]) for row in cursor.fetchall()]


class SqliteStore:
    """One plain table for the embedded demo: same interface, no partitions."""

    def write(self, rows: Sequence[SampleRow]) -> int:
        marks = ", ".join(["%s"] * len(COLUMNS))
        accepted = 0
        with transaction.atomic(), connection.cursor() as cursor:
            for row in rows:
                cursor.execute(f"INSERT OR IGNORE INTO gpu_sample ({_COLS}) VALUES ({marks})", _sqlite(row))  # noqa: S608
                accepted += cursor.rowcount
        return accepted

    def ensure_partitions(self, *, start: date, days: int) -> list[str]:
        return []

    def drop_before(self, *, day: date) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM gpu_sample WHERE ts < %s", [f"{day.isoformat()} 00:00:00"])
            return [f"rows before {day.isoformat()}"] if cursor.rowcount else []

    def partitions(self) -> list[str]:
        return []


def _sqlite(row: SampleRow) -> list[Any]:
    """Django keeps SQLite datetimes as naive UTC text, and JSON as text; match it so the ORM reads them."""
    return [_sqlite_value(kind, value) for kind, value in zip(TYPES, row, strict=True)]


def _sqlite_value(kind: str, value: Any) -> Any:
    if kind == "timestamptz":
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ")
    if kind == "jsonb" and value is not None:
        return value.decode()
    return value


def store() -> SampleStore:
    return PostgresStore() if connection.vendor == "postgresql" else SqliteStore()
