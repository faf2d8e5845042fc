"""The demo's simulated agents speak the contract and follow the jobs running on each node."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import msgspec
import pytest

from gpu.ingest import parse_batch
from plugin.contract import IngestBatch
from portal.demo.agents import SimGpu, assign, gpu_uuid, sample
from tests.fixtures.personas import World
from workloads.models import Job

pytestmark = pytest.mark.django_db


def test_running_jobs_land_on_gpus_and_samples_pass_ingest_validation(world: World) -> None:
    whole = Job(project=world.alpha, owner=world.member, image="x", gpus=2, node="n1", pod_name="job-a-0")
    shared = Job(
        project=world.beta, owner=world.outsider, image="x", mps_slices=2, node="n1", pod_name="job-b-0"
    )
    gpus = [SimGpu(gpu_uuid("n1", i)) for i in range(4)]
    assign([whole, shared], gpus)
    assert [len(g.procs) for g in gpus] == [1, 1, 0, 1]  # whole GPUs 0-1, the MPS job on the last free one
    now = datetime.now(UTC)
    rng = random.Random(1)
    body = IngestBatch(node="n1", agent_version="sim", samples=[sample(g, now, rng) for g in gpus])
    _, parsed = parse_batch(msgspec.json.encode(body), now=now)
    assert parsed[0].processes[0].pod_namespace == "gp-alpha"
    for _ in range(10):
        busy, idle = sample(gpus[0], now, rng), sample(gpus[2], now, rng)
    assert busy.util_gpu > 60
    assert idle.util_gpu < 10
