"""Storing the cycle's explanations: only rows that differ are written and announced, and a job
that left the queue keeps what it has."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job
from workloads.queue import Explanation
from workloads.services import jobs as services
from workloads.services.queue import explanations_store
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db


def explained(job: Job, *, position: int, sentence: str = "waiting for 1 GPU") -> Explanation:
    return Explanation(
        job_id=job.pk,
        code="no_node",
        numbers={"need": 1},
        position_project=position,
        position_global=position,
        estimated_start=None,
        sentence=sentence,
    )


def submitted(world: World, n: int) -> list[Job]:
    data: dict[str, Any] = {"image": IMAGE, "gpus": 1}
    return [services.job_submit(actor=world.owner, project=world.alpha, data=data) for _ in range(n)]


def test_only_what_differs_is_written_and_announced(jobs_world: World) -> None:
    a, b, c = submitted(jobs_world, 3)
    first = [explained(a, position=1), explained(b, position=2), explained(c, position=3)]
    assert sorted(explanations_store(explanations=first)) == sorted([a.pk, b.pk, c.pk])
    with CaptureQueriesContext(connection) as same:
        assert explanations_store(explanations=first) == []
    assert [q["sql"].split()[0] for q in same.captured_queries] == ["SELECT"]  # nothing written
    # b's place moves (its explanation quotes it), c's sentence changes; a stays as it was.
    again = [explained(a, position=1), explained(b, position=5), explained(c, position=3, sentence="held")]
    assert sorted(explanations_store(explanations=again)) == sorted([b.pk, c.pk])
    stored = {j.pk: (j.queue_position, j.queue_explanation["sentence"]) for j in Job.objects.all()}
    assert stored == {a.pk: (1, "waiting for 1 GPU"), b.pk: (5, "waiting for 1 GPU"), c.pk: (3, "held")}


def test_a_job_that_left_the_queue_keeps_its_explanation(jobs_world: World) -> None:
    (job,) = submitted(jobs_world, 1)
    Job.objects.filter(pk=job.pk).update(state=JobState.ADMITTED, queue_explanation={"sentence": "admitted"})
    assert explanations_store(explanations=[explained(job, position=1)]) == []
    job.refresh_from_db()
    assert (job.queue_explanation, job.queue_position) == ({"sentence": "admitted"}, None)
