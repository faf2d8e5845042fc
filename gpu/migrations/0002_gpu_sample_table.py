"""The raw sample table, made by hand: range-partitioned by day on Postgres, plain on SQLite.

Partitions themselves are made ahead of time by the `gpu.partitions_maintain` task (and on demand
by ingest), and dropped whole when they pass the retention window.
"""

from typing import Any

from django.db import migrations

POSTGRES = """
CREATE TABLE IF NOT EXISTS gpu_sample (
    gpu_id bigint NOT NULL,
    ts timestamptz NOT NULL,
    util_gpu smallint NOT NULL,
    util_mem smallint NOT NULL,
    mem_used_mib integer NOT NULL,
    mem_total_mib integer NOT NULL,
    temp_c real NOT NULL,
    power_w real NOT NULL,
    sm_clock_mhz integer NOT NULL,
    mem_clock_mhz integer NOT NULL,
    ecc_sbe bigint NOT NULL,
    ecc_dbe bigint NOT NULL,
    xid integer NULL,
    processes jsonb NULL,
    PRIMARY KEY (gpu_id, ts)
) PARTITION BY RANGE (ts);
"""

SQLITE = """
CREATE TABLE IF NOT EXISTS gpu_sample (
    gpu_id bigint NOT NULL,
    ts datetime NOT NULL,
    util_gpu smallint NOT NULL,
    util_mem smallint NOT NULL,
    mem_used_mib integer NOT NULL,
    mem_total_mib integer NOT NULL,
    temp_c real NOT NULL,
    power_w real NOT NULL,
    sm_clock_mhz integer NOT NULL,
    mem_clock_mhz integer NOT NULL,
    ecc_sbe bigint NOT NULL,
    ecc_dbe bigint NOT NULL,
    xid integer NULL,
    processes text NULL,
    PRIMARY KEY (gpu_id, ts)
);
"""


class VendorSQL(migrations.RunSQL):
    """RunSQL that only runs on one database vendor (connection.vendor)."""

    def __init__(self, vendor: str, sql: str, reverse_sql: str) -> None:
        super().__init__(sql, reverse_sql)
        self.vendor = vendor

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)

    def deconstruct(self) -> Any:
        name, args, kwargs = super().deconstruct()
        return name, [self.vendor, self.sql, self.reverse_sql], {}


class Migration(migrations.Migration):
    dependencies = [("gpu", "0001_initial")]

    operations = [
        VendorSQL("postgresql", POSTGRES, "DROP TABLE IF EXISTS gpu_sample CASCADE;"),
        VendorSQL("sqlite", SQLITE, "DROP TABLE IF EXISTS gpu_sample;"),
    ]
