"""Each kind of job event, raised by the code that really raises it (a state transition, the queue's
preemption notice, the idle sweep on ingested samples, a failed GPU), reaches both the owner's email and
the project's webhook under its own event name; the owner's choice for that kind, and only it, stops
the email, never the webhook."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
from django.core import mail
from django.utils import timezone

from accounts import services
from accounts.choices import NotifyEvent
from accounts.choices import TaskName as AccountsTask
from accounts.models import ProjectWebhook, WebhookDelivery
from gpu.ingest import ingest_batch
from gpu.models import Node
from gpu.tests.factories import batch, make_gpus, make_node, series
from tests.fixtures.personas import World
from workloads.choices import JobState, TaskName
from workloads.models import Job, QueueSettings
from workloads.queue import CyclePlan, PreemptionNotice
from workloads.services import notifications
from workloads.services.gpu_failures import jobs_requeue_for_failed_gpu
from workloads.services.idle import idle_sweep
from workloads.services.queue import job_preempt, notices_apply
from workloads.services.transitions import job_transition
from workloads.tasks import notify_job
from workloads.tests.conftest import capture_sends

pytestmark = pytest.mark.django_db
NODE = "gpu-node-0"


def _start(job: Job) -> None:
    assert job_transition(job=job, to=JobState.RUNNING, reason="pod running")


def _finish(job: Job) -> None:
    assert job_transition(job=job, to=JobState.SUCCEEDED, reason="completed", exit_code=0)


def _fail(job: Job) -> None:
    assert job_transition(job=job, to=JobState.FAILED, reason="error", exit_code=3)


def _notice(job: Job) -> None:
    now = timezone.now()
    notice = PreemptionNotice(
        job_id=job.pk, for_job=job.pk + 1000, issued_at=now, deadline=now + timedelta(minutes=5)
    )
    notices_apply(plan=cast("CyclePlan", SimpleNamespace(withdraw=[], notices=[notice])), now=now)


def _preempt(job: Job) -> None:
    assert job_preempt(job_id=job.pk)


def _idle(job: Job) -> None:
    QueueSettings.objects.update_or_create(pk=1, defaults={"idle_window_s": 120, "idle_warning_s": 60})
    (gpu,) = make_gpus(make_node(NODE), 1)
    pod = {"namespace": job.namespace, "pod": f"{job.k8s_name}-x7k2p"}
    end = datetime.now(UTC)
    samples = series(gpu.uuid, 130, start=end - timedelta(seconds=130), util=1, **pod)[::5]
    ingest_batch(node=Node.objects.get(name=NODE), raw=batch(NODE, samples))
    assert idle_sweep()["warn"] == 1


def _gpu_failed(job: Job) -> None:
    pods = [(job.namespace, f"{job.k8s_name}-x7k2p")]
    assert jobs_requeue_for_failed_gpu(node=NODE, gpu_uuid="GPU-1", reason="XID 79", pods=pods) == [job.pk]


# (the owner's choice that covers it, the job's state before, what raises it, the webhook's event)
CASES: list[tuple[NotifyEvent, JobState, Callable[[Job], None], str]] = [
    (NotifyEvent.STARTED, JobState.ADMITTED, _start, "job.started"),
    (NotifyEvent.FINISHED, JobState.RUNNING, _finish, "job.succeeded"),
    (NotifyEvent.FAILED, JobState.RUNNING, _fail, "job.failed"),
    (NotifyEvent.PREEMPTION, JobState.RUNNING, _notice, "job.preemption_notice"),
    (NotifyEvent.PREEMPTION, JobState.RUNNING, _preempt, "job.preempted"),  # when the notice ends
    (NotifyEvent.IDLE, JobState.RUNNING, _idle, "job.idle_warning"),
    (NotifyEvent.GPU_REQUEUE, JobState.RUNNING, _gpu_failed, "job.gpu_requeue"),
]


def _raise(
    world: World,
    state: JobState,
    produce: Callable[[Job], None],
    monkeypatch: pytest.MonkeyPatch,
    capture: Any,
) -> tuple[Job, list[int]]:
    """A job of bob's in `state`; `produce` raises the event; the notify task runs what it queued."""
    ProjectWebhook.objects.create(project=world.alpha, url="https://hooks.example.org/x", secret="s" * 64)
    notes = capture_sends(monkeypatch, TaskName.NOTIFY_JOB)
    deliveries = capture_sends(monkeypatch, AccountsTask.DELIVER_WEBHOOK)
    job = Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image="pytorch",
        gpus=1,
        node=NODE,
        state=state,
        started_at=timezone.now() - timedelta(minutes=10),
    )
    with capture(execute=True):
        produce(job)
    kinds = [kind for job_id, kind in notes if job_id == job.pk]
    assert len(kinds) == 1, notes
    with capture(execute=True):
        notify_job(job.pk, kinds[0])
    return job, deliveries


@pytest.mark.parametrize(("choice", "state", "produce", "event"), CASES, ids=[c[3] for c in CASES])
def test_each_event_emails_the_owner_and_reaches_the_webhook(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    choice: NotifyEvent,
    state: JobState,
    produce: Callable[[Job], None],
    event: str,
) -> None:
    others = {value: value == choice for value in NotifyEvent.values}  # every other kind muted
    services.user_set_notifications(user=world.member, email=True, events=others)
    job, deliveries = _raise(world, state, produce, monkeypatch, django_capture_on_commit_callbacks)
    (sent,) = mail.outbox
    assert sent.to == [world.member.email]
    assert str(job) in sent.subject
    (delivery,) = WebhookDelivery.objects.all()
    assert (delivery.event, delivery.payload["job"]["uid"]) == (event, str(job.uid))
    assert deliveries == [delivery.pk]


@pytest.mark.parametrize(("choice", "state", "produce", "event"), CASES, ids=[c[3] for c in CASES])
def test_muting_a_kind_stops_its_email_but_not_its_webhook(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    choice: NotifyEvent,
    state: JobState,
    produce: Callable[[Job], None],
    event: str,
) -> None:
    services.user_set_notifications(
        user=world.member, email=True, events={value: value != choice for value in NotifyEvent.values}
    )
    _raise(world, state, produce, monkeypatch, django_capture_on_commit_callbacks)
    assert mail.outbox == []
    assert list(WebhookDelivery.objects.values_list("event", flat=True)) == [event]


def test_the_master_switch_off_emails_nothing(world: World) -> None:
    services.user_set_notifications(
        user=world.member, email=False, events=dict.fromkeys(NotifyEvent.values, True)
    )
    job = Job.objects.create(project=world.alpha, owner=world.member, image="pytorch", state=JobState.RUNNING)
    notify_job(job.pk, "started")
    assert mail.outbox == []


@pytest.mark.parametrize(
    ("kind", "event"),
    [
        ("was lost (the cluster showed no trace of it)", ("job.lost", NotifyEvent.FAILED)),
        (notifications.IDLE_SUSPENDED, ("job.idle_suspended", NotifyEvent.IDLE)),
        (notifications.WORKERS_HUNG, ("job.workers_hung", NotifyEvent.IDLE)),
        (
            "had a worker fail; all 2 workers start again (restart 1 of 1)",
            ("job.workers_restart", NotifyEvent.FAILED),
        ),
        ("did something new", ("job.notice", None)),
    ],
)
def test_the_follow_up_events_go_under_their_own_names(
    kind: str, event: tuple[str, NotifyEvent | None]
) -> None:
    assert tuple(notifications.event_of(kind)) == event
