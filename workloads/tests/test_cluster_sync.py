from __future__ import annotations

import threading
from typing import Any

import pytest
from django.utils import timezone

from tests.fixtures.personas import World
from workloads.choices import TaskName
from workloads.controller.event_batch import MAX_BATCH, EventBatch
from workloads.controller.watches import EVENTS, WATCH_SPECS, _SeenVersions, event_watch_spec
from workloads.k8s.status import event_projection
from workloads.models import OrphanReport
from workloads.selectors import jobs_needing_reconcile
from workloads.services import jobs as services
from workloads.services import publisher
from workloads.services.cluster_sync import orphans_report
from workloads.services.k8s_events import k8s_event_record, k8s_events_record
from workloads.tests.conftest import IMAGE


def event(name: str, uid: str = "e1", count: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "namespace": "gp-alpha", "creationTimestamp": "2026-11-30T10:00:00Z"},
        "involvedObject": {"kind": "Pod", "name": name},
        "reason": "Scheduled",
        "message": "assigned to gpu-node-0",
        "type": "Normal",
        "count": count,
        "lastTimestamp": "2026-11-30T10:00:01Z",
    }


def test_event_projection_keeps_only_job_objects() -> None:
    uid = "12345678-1234-5678-1234-567812345678"
    assert event_projection(event(f"job-{uid}-abcde"))["job_uid"] == uid  # type: ignore[index]
    assert event_projection(event(f"job-{uid}-3-abcde"))["job_uid"] == uid  # type: ignore[index]
    assert event_projection(event("someone-else")) is None


@pytest.mark.django_db
def test_k8s_events_are_upserted_by_uid(jobs_world: World) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    for count in (1, 3):
        projected = event_projection(event(f"job-{job.uid}-x1y2z", count=count))
        assert projected is not None
        k8s_event_record(event=projected)
    rows = list(job.events.filter(kind="k8s"))
    assert [(r.reason, r.count, r.object_ref) for r in rows] == [("Scheduled", 3, f"Pod/job-{job.uid}-x1y2z")]


def test_event_projection_carries_the_namespace_and_refuses_a_mismatch() -> None:
    uid = "12345678-1234-5678-1234-567812345678"
    assert event_projection(event(f"job-{uid}-abcde"))["namespace"] == "gp-alpha"  # type: ignore[index]
    other = event(f"job-{uid}-abcde")
    other["involvedObject"]["namespace"] = "gp-beta"
    assert event_projection(other) is None


@pytest.mark.django_db
def test_an_event_in_another_namespace_is_not_attached_to_the_job(jobs_world: World) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    forged = event(f"job-{job.uid}-x1y2z", uid="forged")
    forged["metadata"]["namespace"] = "gp-beta"  # a pod in beta named after alpha's job
    projected = event_projection(forged)
    assert projected is not None
    assert k8s_event_record(event=projected) is None
    assert not job.events.filter(kind="k8s").exists()


@pytest.mark.django_db
def test_orphans_are_recorded_once(jobs_world: World, caplog: pytest.LogCaptureFixture) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ours = {
        "metadata": {
            "namespace": "gp-alpha",
            "name": job.k8s_name,
            "labels": {"gpuportal.dev/job-uid": str(job.uid)},
        }
    }
    stray = {
        "metadata": {"namespace": "gp-alpha", "name": "job-x", "labels": {"gpuportal.dev/job-uid": "nope"}}
    }
    elsewhere = {  # another portal's Job on the same cluster: its namespace has another prefix
        "metadata": {
            "namespace": "staging-alpha",
            "name": "job-y",
            "labels": {"gpuportal.dev/job-uid": "nope"},
        }
    }
    orphans_report(cluster_jobs=[ours, stray, elsewhere])
    first = OrphanReport.objects.get().first_seen
    orphans_report(cluster_jobs=[ours, stray])
    assert list(OrphanReport.objects.values_list("name", flat=True)) == ["job-x"]
    assert jobs_needing_reconcile() == [job.pk]
    logged = [r for r in caplog.records if "orphan Kubernetes Job gp-alpha/job-x" in r.getMessage()]
    assert len(logged) == 1  # the second sweep saw it again and said nothing new
    OrphanReport.objects.update(resolved_at=timezone.now())  # an operator marked it resolved; it is back
    orphans_report(cluster_jobs=[ours, stray])
    report = OrphanReport.objects.get()
    assert report.resolved_at is None
    assert report.first_seen == first
    assert report.last_seen > first
    assert len([r for r in caplog.records if "gp-alpha/job-x" in r.getMessage()]) == 2


def test_relist_enqueues_only_changed_or_vanished() -> None:
    seen = _SeenVersions()

    def obj(uid: str, rv: str) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": rv, "labels": {"gpuportal.dev/job-uid": uid}}}

    assert sorted(seen.changed([obj("a", "1"), obj("b", "1")])) == ["a", "b"]
    assert seen.changed([obj("a", "1"), obj("b", "2")]) == ["b"]
    assert seen.changed([obj("a", "1")]) == ["b"]


def test_watch_specs_are_factories_another_app_can_extend() -> None:
    specs = [factory() for factory in WATCH_SPECS]
    assert [s.name for s in specs][:3] == ["jobs", "pods", "events"]
    assert specs[0].label_selector == "app.kubernetes.io/managed-by=gpu-portal"


@pytest.mark.django_db
def test_a_batch_of_events_is_upserted_in_two_statements(
    jobs_world: World, django_assert_num_queries: Any
) -> None:
    one = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    two = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    forged = event(f"job-{two.uid}-q", uid="forged")
    forged["metadata"]["namespace"] = "gp-beta"
    raw = [event(f"job-{one.uid}-a", uid=f"e{i}") for i in range(30)]
    raw += [event(f"job-{two.uid}-b", uid="t", count=2), event(f"job-{two.uid}-b", uid="t", count=5), forged]
    batch = [p for p in map(event_projection, raw) if p is not None]
    with django_assert_num_queries(2):  # the jobs, then one INSERT ... ON CONFLICT for every row
        assert k8s_events_record(events=batch) == 31
    assert k8s_events_record(events=batch) == 31  # sent twice: the same rows, nothing new
    assert one.events.filter(kind="k8s").count() == 30
    assert list(two.events.filter(kind="k8s").values_list("k8s_uid", "count")) == [("t", 5)]  # the last


def test_the_event_batch_sends_full_batches_at_once_and_the_rest_on_flush() -> None:
    sent: list[int] = []
    batch = EventBatch(send=lambda events: sent.append(len(events)))
    for i in range(MAX_BATCH * 2 + 50):
        batch.add({"uid": str(i)})
    assert sent == [MAX_BATCH, MAX_BATCH]
    stop = threading.Event()
    stop.set()
    batch.run(stop)  # stopped: flushes what is left once
    assert sent == [MAX_BATCH, MAX_BATCH, 50]
    assert batch.flush() == 0
    assert len(sent) == 3


def test_the_event_watch_buffers_instead_of_sending_a_task_per_event(monkeypatch: pytest.MonkeyPatch) -> None:
    sends: list[Any] = []
    monkeypatch.setattr(publisher, "send", lambda *a, **k: sends.append(a))
    EVENTS.flush()  # the process-wide buffer may hold an earlier test's event (a fresh-clone run had 4)
    sends.clear()
    uid = "12345678-1234-5678-1234-567812345678"
    handler = event_watch_spec().on_event
    for i in range(3):
        handler("ADDED", event(f"job-{uid}-abcde", uid=f"e{i}"))
    handler("ADDED", {**event(f"job-{uid}-abcde"), "metadata": {"uid": "x", "namespace": "kube-system"}})
    assert sends == []
    assert EVENTS.flush() == 3
    assert [(name, [e["uid"] for e in events]) for name, events in sends] == [
        (TaskName.RECORD_K8S_EVENTS, ["e0", "e1", "e2"])
    ]
