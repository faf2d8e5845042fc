"""Right-sizing: the hint rule (pure), the oversized-jobs rule, used GPU-hours, the one-click rerun at
the suggested size, and the job's API block."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from gpu.tests.factories import make_node
from tests.fixtures.personas import World, api_client, session_client
from workloads.accounting import gpu_hours_rollup, gpu_hours_rows, job_used_hours, usage_totals
from workloads.choices import JobState
from workloads.models import Job
from workloads.rightsizing import is_oversized, oversized_jobs, suggest
from workloads.tests.conftest import IMAGE, allow_images

GIB = 1024


def measured(minutes: float = 60, *, mem: int = 9 * GIB, sm: int = 20, **fields: Any) -> Job:
    """An unsaved job that ran `minutes` (ended now) with the given peaks on a 32 GiB GPU."""
    end = timezone.now()
    values: dict[str, Any] = {
        "image": "x",
        "gpus": 1,
        "state": JobState.SUCCEEDED,
        "started_at": end - timedelta(minutes=minutes),
        "finished_at": end,
        "telemetry_until": end,
        "peak_gpu_mem_mib": mem,
        "peak_sm_pct": sm,
        "gpu_mem_total_mib": 32 * GIB,
    }
    return Job(**{**values, **fields})


def test_one_gpu_at_9_gib_and_20_percent_is_told_a_2_slice_share_would_do() -> None:
    hint = suggest(measured(), per_gpu=4)
    assert hint is not None
    assert hint.text == "asked 32 GiB on 1 GPU, peak 9 GiB and 20 %: a 2-slice share would do"
    assert hint.edits == {"gpus": 0, "mps_slices": 2}


def test_the_suggestion_keeps_headroom_over_the_sm_peak_too() -> None:
    hint = suggest(measured(mem=1 * GIB, sm=45), per_gpu=4)  # 45 % * 1.2 = 54 % of 4 slices -> 3, not 2
    assert hint is not None
    assert hint.edits == {"gpus": 0, "mps_slices": 3}


@pytest.mark.parametrize(
    "job",
    [
        measured(mem=30 * GIB),  # memory nearly full: no smaller size
        measured(sm=90),  # SM busy
        measured(minutes=5),  # too short a run to judge
        measured(telemetry_until=None),  # never measured
        measured(gpus=0, mps_slices=1),  # one slice is the smallest size
        measured(workers=2),  # one GPU a worker: slices are for jobs of one worker
    ],
)
def test_no_hint_where_no_smaller_size_fits_or_nothing_was_measured(job: Job) -> None:
    assert suggest(job, per_gpu=4) is None


def test_a_multi_gpu_job_is_told_fewer_gpus() -> None:
    hint = suggest(measured(gpus=4), per_gpu=4)
    assert hint is not None
    assert hint.edits == {"gpus": 2, "mps_slices": 0}
    assert hint.text == "asked 4 GPUs of 32 GiB, peak 9 GiB and 20 % per GPU: 2 GPUs would do"


def test_a_job_of_several_workers_is_told_fewer_gpus_for_each_worker() -> None:
    hint = suggest(measured(gpus=4, workers=3), per_gpu=4)
    assert hint is not None
    assert hint.edits == {"gpus": 2, "mps_slices": 0}
    assert hint.text == (
        "asked 4 GPUs of 32 GiB each worker, peak 9 GiB and 20 % per GPU: 2 GPUs each worker would do"
    )


def test_a_slice_job_is_told_fewer_slices_of_the_gpu_it_ran_on() -> None:
    hint = suggest(measured(gpus=0, mps_slices=6, mem=3 * GIB, sm=10), per_gpu=8)
    assert hint is not None
    assert hint.edits == {"gpus": 0, "mps_slices": 1}
    assert hint.text.startswith("asked 24 GiB on 6 slices of a 32 GiB GPU, peak 3 GiB and 10 %")


@pytest.mark.parametrize(
    ("job", "oversized"),
    [
        (measured(mem=4 * GIB, sm=10), True),
        (measured(mem=4 * GIB, sm=30), False),  # SM at or over the 25 % line
        (measured(mem=9 * GIB, sm=10), False),  # 28 % of the memory
        (measured(mem=4 * GIB, sm=10, minutes=5), False),  # too short
        (measured(mem=4 * GIB, sm=10, state=JobState.RUNNING, finished_at=None), False),  # not finished
        (measured(gpus=0, mps_slices=2, mem=4 * GIB, sm=10), False),  # half of a 2-of-4 slice share
    ],
)
def test_oversized_means_both_peaks_under_a_quarter_of_the_ask(job: Job, oversized: bool) -> None:
    assert is_oversized(job, per_gpu=4) is oversized


def _saved(world: World, **fields: Any) -> Job:
    job = measured(**fields)
    job.project, job.owner, job.image = world.alpha, world.owner, IMAGE
    job.save()
    return job


@pytest.mark.django_db
def test_the_project_lists_its_oversized_jobs_with_their_suggestion(world: World) -> None:
    small = _saved(world, mem=4 * GIB, sm=10, name="tiny")
    _saved(world, mem=20 * GIB, sm=80, name="heavy-run")
    listed = oversized_jobs(project=world.alpha)
    assert [(job.pk, hint.edits if hint else None) for job, hint in listed] == [
        (small.pk, {"gpus": 0, "mps_slices": 1})
    ]
    page = session_client(world.owner).get(f"/jobs/projects/{world.alpha.slug}/usage/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "tiny" in body
    assert "a 1-slice share would do" in body
    assert "heavy-run" not in body


@pytest.mark.django_db
def test_used_gpu_hours_per_job_user_project_and_type(world: World) -> None:
    make_node("gpu-node-0")  # its GPUs are NVIDIA-GeForce-RTX-5090
    whole = _saved(world, gpus=2, busy_gpu_seconds=3600.0, node="gpu-node-0")  # 2 GPUs x 1 h = 2 h
    sliced = _saved(world, gpus=0, mps_slices=2, busy_gpu_seconds=3600.0, gpu_type="H100")
    assert job_used_hours(whole, {}) == pytest.approx(1.0)  # busy GPU-seconds summed over its GPUs
    assert job_used_hours(sliced, {}) == pytest.approx(0.5)  # 2 of 4 slices busy for 1 h
    rows = gpu_hours_rows(user=world.owner)
    assert sorted((r["gpu_type"], r["gpu_hours"], r["used_gpu_hours"]) for r in rows) == [
        ("H100", 0.5, 0.5),
        ("NVIDIA-GeForce-RTX-5090", 2.0, 1.0),
    ]
    assert gpu_hours_rollup(rows, by="project") == [
        {"project": "alpha", "gpu_hours": 2.5, "used_gpu_hours": 1.5}
    ]
    by_type = usage_totals(jobs=Job.objects.all(), by="gpu_type")
    assert [(r["gpu_type"], r["used_gpu_hours"]) for r in by_type] == [
        ("H100", 0.5),
        ("NVIDIA-GeForce-RTX-5090", 1.0),
    ]
    csv = api_client(world.owner).get("/api/v1/jobs/accounting/?group=gpu_type").content.decode()
    assert csv.splitlines()[0] == "gpu_type,gpu_hours,used_gpu_hours"
    usage = api_client(world.owner).get("/api/v1/usage/?group=user").json()["results"]
    assert sum(r["used_gpu_hours"] for r in usage) == pytest.approx(1.5, abs=1e-3)


@pytest.mark.django_db
def test_one_click_rerun_at_the_suggested_size(world: World) -> None:
    allow_images(world.alpha)
    job = _saved(world, node="gpu-node-0")
    api = api_client(world.owner).get(f"/api/v1/jobs/{job.uid}/").json()["rightsizing"]
    assert api["peak_gpu_mem_mib"] == 9 * GIB
    assert api["peak_sm_pct"] == 20
    assert api["hint"] == {
        "text": "asked 32 GiB on 1 GPU, peak 9 GiB and 20 %: a 2-slice share would do",
        "gpus": 0,
        "mps_slices": 2,
    }
    client = session_client(world.owner)
    assert "Rerun with 2 slices" in client.get(f"/jobs/{job.uid}/").content.decode()
    response = client.post(f"/jobs/{job.uid}/rerun/rightsized/")
    new = Job.objects.exclude(pk=job.pk).get()
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{new.uid}/"
    assert (new.rerun_of_id, new.gpus, new.mps_slices, new.image) == (job.pk, 0, 2, IMAGE)


@pytest.mark.django_db
def test_no_rightsized_rerun_without_a_hint_nor_for_a_viewer(world: World) -> None:
    allow_images(world.alpha)
    busy = _saved(world, mem=30 * GIB)
    session_client(world.owner).post(f"/jobs/{busy.uid}/rerun/rightsized/")
    small = _saved(world)
    session_client(world.viewer).post(f"/jobs/{small.uid}/rerun/rightsized/")
    assert Job.objects.count() == 2
