"""Job's rows become instances through workloads.loading.FastLoad: every field a query loads must land
where Django's own Model.from_db puts it, every field it leaves out must load on access, and where
something expects Django's path (an init signal's receiver) that path is taken. And the loads that
never read the kept log leave it out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job, QueuedJob
from workloads.selectors import job_of_uid
from workloads.services import jobs as services
from workloads.services.cluster_sync import job_reconcile
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db

FIELDS = [f.attname for f in Job._meta.concrete_fields]


def _job(world: World) -> Job:
    """A job with every kind of field set to something other than its default."""
    spec: dict[str, Any] = {
        "image": IMAGE,
        "gpus": 2,
        "command": ["python", "train.py"],
        "name": "full",
        "args": ["--lr", "3e-4"],
        "env": [{"name": "SEED", "value": "7"}],
    }
    job = services.job_submit(actor=world.member, project=world.alpha, data=spec)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        state=JobState.FAILED,
        exit_code=3,
        state_reason="OOMKilled",
        started_at=now - timedelta(hours=1),
        finished_at=now,
        node="gpu-node-0",
        log_tail="the end of the log\n",
        log_captured=True,
        peak_gpu_mem_mib=9000,
        busy_gpu_seconds=12.5,
        queue_explanation={"code": "quota"},
        idle_snoozes=2,
    )
    return job


def _values(job: Job) -> dict[str, Any]:
    """Everything the instance holds but its state (Django's makes the state's fields cache eagerly)."""
    assert set(job.__dict__) - set(FIELDS) == {"_state"}
    return {name: job.__dict__[name] for name in FIELDS if name in job.__dict__}


def _djangos(names: list[str], values: list[Any]) -> Job:
    """What Django's own Model.from_db makes of the same row."""
    made = Model.from_db.__func__(Job, "default", names, values)  # type: ignore[attr-defined]
    assert isinstance(made, Job)
    return made


@pytest.mark.parametrize(
    "shape",
    [
        lambda qs: qs.defer("log_tail"),  # every list's shape
        lambda qs: qs.defer("log_tail", "queue_explanation", "project"),
        lambda qs: qs.only("name", "state", "finished_at"),
        lambda qs: qs.select_related("project", "owner").defer("log_tail"),
        lambda qs: qs.only("uid", "idle_snoozes", "owner").select_related("owner"),
    ],
)
def test_a_deferred_load_equals_the_full_one_in_every_loaded_field(jobs_world: World, shape: Any) -> None:
    full = _values(Job.objects.get(pk=_job(jobs_world).pk))
    for _ in range(2):  # the shape's layout computed, then reused
        job = shape(Job.objects.filter(pk=full["id"])).get()
        loaded = _values(job)
        assert loaded == {name: full[name] for name in loaded}
        assert set(loaded) | job.get_deferred_fields() == set(FIELDS)
        assert loaded == _values(_djangos(list(loaded), list(loaded.values())))
        assert (job._state.adding, job._state.db) == (False, "default")


def test_a_deferred_field_loads_when_read(jobs_world: World) -> None:
    job = Job.objects.defer("log_tail").get(pk=_job(jobs_world).pk)
    assert job.get_deferred_fields() == {"log_tail"}
    with CaptureQueriesContext(connection) as queries:
        assert job.log_tail == "the end of the log\n"
    assert len(queries) == 1


def test_a_full_load_is_djangos(jobs_world: World) -> None:
    job = Job.objects.get(pk=_job(jobs_world).pk)
    assert job.get_deferred_fields() == set()
    assert _values(job) == _values(_djangos(FIELDS, [job.__dict__[name] for name in FIELDS]))


def test_a_proxy_loads_the_same(jobs_world: World) -> None:
    job = _job(jobs_world)
    queued = QueuedJob.objects.defer("log_tail").get(pk=job.pk)
    assert type(queued) is QueuedJob
    assert _values(queued) == _values(Job.objects.defer("log_tail").get(pk=job.pk))


def test_an_init_signal_receiver_gets_djangos_path(jobs_world: World) -> None:
    job = _job(jobs_world)
    fast = _values(Job.objects.defer("log_tail").get(pk=job.pk))
    seen: list[Job] = []

    def receiver(sender: type[Job], instance: Job, **kwargs: Any) -> None:
        seen.append(instance)

    post_init.connect(receiver, sender=Job)
    try:
        slow = Job.objects.defer("log_tail").get(pk=job.pk)
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert seen == [slow]
    assert _values(slow) == fast
    assert slow.get_deferred_fields() == {"log_tail"}


def test_a_reconcile_never_loads_the_kept_log(jobs_world: World, fake_kube: Any) -> None:
    """A finished job's row holds up to 256 KiB of log, which no reconcile needs (loading it slowed
    the worker under the submit benchmark)."""
    job = _job(jobs_world)
    Job.objects.filter(pk=job.pk).update(log_tail="x" * 200_000)
    with CaptureQueriesContext(connection) as queries:
        job_reconcile(job_id=job.pk, client=fake_kube)
        assert job_of_uid(uid=str(job.uid)) is not None
    sql = [q["sql"] for q in queries]
    loads = [q for q in sql if q.startswith("SELECT") and '"workloads_job"."id"' in q]
    assert len(loads) >= 2
    assert not [q for q in loads if "log_tail" in q]
