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
from typing import Any, Protocol

from django.db import DatabaseError, connection, transaction
from psycopg import adapt, postgres
from psycopg.errors import CheckViolation, UniqueViolation
from psycopg.pq import Format

# (gpu_id, ts, util_gpu, util_mem, mem_used_mib, mem_total_mib, temp_c, power_w, sm_clock_mhz,
#  mem_clock_mhz, ecc_sbe, ecc_dbe, xid, processes as JSON text in UTF-8)
SampleRow = tuple[
    int, datetime, int, int, int, int, float, float, int, int, int, int, int | None, bytes | None
]

COLUMNS = (
    "gpu_id",
    "ts",
    "util_gpu",
    "util_mem",
    "mem_used_mib",
    "mem_total_mib",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "ecc_sbe",
    "ecc_dbe",
    "xid",
    "processes",
)
_COLS = ", ".join(COLUMNS)
# The columns' types (migration 0002) for a binary COPY: Postgres then reads each value as it is
# stored, where a text COPY parsed every timestamp and number (the same batches took 40 % less time, B6).
_TYPES = ["int8", "timestamptz", "int2", "int2", "int4", "int4", "float4", "float4", "int4", "int4",
          "int8", "int8", "int4", "jsonb"]  # fmt: skip


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
            self._ensure_days({row[1].date() for row in rows})
            refused = self._copy_new(rows)
        if refused is None:
            return len(rows)
        # A retried batch met the (gpu, ts) key: store only its new rows. The COPY stopped before
        # seeing them all, so their days may still lack a partition.
        self._ensure_days({row[1].date() for row in rows})
        return self._merge(rows)

    def _copy_new(self, rows: Sequence[SampleRow]) -> Exception | None:
        """COPY straight into the table, the common case: as fast as Postgres takes rows. Returns the
        refusal (a duplicate key, or a day without partition) instead of raising it: raised through an
        atomic block it would doom the caller's transaction. The savepoint is set by hand and never
        released (COMMIT ends it): Django's atomic() sent a RELEASE per batch (B6)."""
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
            copy.set_types(_TYPES)
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
    # Django keeps SQLite datetimes as naive UTC text; match it so ORM range filters compare right.
    values: list[Any] = list(row)
    values[1] = row[1].astimezone(UTC).replace(tzinfo=None).isoformat(" ")
    values[13] = row[13].decode() if row[13] is not None else None  # JSON as text, as Django reads it
    return values


def store() -> SampleStore:
    return PostgresStore() if connection.vendor == "postgresql" else SqliteStore()
