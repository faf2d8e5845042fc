"""The embedded demo's ingest path on its own database, SQLite, in a process of its own (as `make
demo` runs it, no DATABASE_URL): a batch is stored with its processes, a retried batch stores nothing
twice, and the GPUs' health bookkeeping runs. The rest of the suite runs on Postgres, so SQL that only
Postgres accepts would otherwise reach the demo unseen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.workloads_e2e.procs import REPO, embedded_env

SCRIPT = """
import json, django
django.setup()
from django.core.management import call_command
from django.db import connection, transaction
call_command("migrate", verbosity=0, interactive=False)
from gpu.ingest import ingest_batch
from gpu.models import Gpu, GpuSample
from gpu.tests.factories import batch, make_gpus, make_node, series
node = make_node("demo-node-0", gpus=2)
make_gpus(node, 2)
on = {"namespace": "gp-alpha", "pod": "job-a-0"}
samples = series("GPU-demo-node-0-0", 3, **on) + series("GPU-demo-node-0-1", 3, **on)
raw = json.dumps(batch(node.name, samples)).encode()
out = {"vendor": connection.vendor}
for attempt in ("first", "retry"):
    with transaction.atomic():
        result = ingest_batch(node=node, raw=raw)
    out[attempt] = [result.accepted, result.duplicates]
out["rows"] = GpuSample.objects.count()
stored = GpuSample.objects.values_list("processes", flat=True).first()
out["processes"] = json.loads(stored) if isinstance(stored, str) else stored
out["seen"] = sorted(str(g.last_seen is not None) for g in Gpu.objects.all())
print(json.dumps(out))
"""


def test_a_batch_is_stored_once_on_the_embedded_database(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env=embedded_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["vendor"] == "sqlite"
    assert out["first"] == [6, 0]
    assert out["retry"] == [0, 6]
    assert out["rows"] == 6
    assert out["processes"][0]["pod_name"] == "job-a-0", out["processes"]
    assert out["seen"] == ["True", "True"]
