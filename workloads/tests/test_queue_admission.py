"""The admission queue through the database path (fake cluster): order, fragmentation, grants,
borrowing and reclaim with notice. The real-cluster versions are in test_queue_cluster.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from accounts.models import AuditLog, Quota, User
from plugin.names import REAL_NODE_LABEL
from tests.fixtures.personas import World
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState, TaskName
from workloads.k8s import paths
from workloads.models import GrantStatus, Job, QueueSettings
from workloads.services import cluster_sync, grants
from workloads.services import jobs as services
from workloads.services import queue as queue_services
from workloads.tests.conftest import IMAGE, capture_sends
from workloads.tests.fakes import FakeKube, fake_node

pytestmark = pytest.mark.django_db


def submit(user: User, project: Any, **spec: Any) -> Job:
    return services.job_submit(actor=user, project=project, data={"image": IMAGE, "gpus": 1, **spec})


def bind_pods(fake: FakeKube) -> None:
    """What the scheduler does: a bound pod for every admitted job, on its planned node."""
    for job in Job.objects.select_related("project").filter(state=JobState.ADMITTED):
        pod = {
            "metadata": {"name": f"{job.k8s_name}-p", "labels": {"gpuportal.dev/job-uid": str(job.uid)}},
            "spec": {
                "nodeName": job.planned_node,
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(job.gpus)}}}],
            },
            "status": {"phase": "Running"},
        }
        fake.objects[f"{paths.pods(job.namespace)}/{job.k8s_name}-p"] = pod


def occupy(fake: FakeKube, node: str, gpus: int, name: str) -> None:
    fake.objects[f"/api/v1/namespaces/other/pods/{name}"] = {
        "metadata": {"name": name, "labels": {}},
        "spec": {
            "nodeName": node,
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def test_priority_beats_fair_share_beats_submit_time(jobs_world: World, fake_kube: FakeKube) -> None:
    fake_kube.nodes = [fake_node("n0", gpus=1)]
    heavy, light = jobs_world.member, jobs_world.owner
    past = submit(heavy, jobs_world.alpha)
    Job.objects.filter(pk=past.pk).update(
        state=JobState.SUCCEEDED,
        started_at=timezone.now() - timedelta(hours=30),
        finished_at=timezone.now() - timedelta(hours=1),
    )
    heavy_first = submit(heavy, jobs_world.alpha)
    light_later = submit(light, jobs_world.alpha)
    light_last = submit(light, jobs_world.alpha)
    low = submit(light, jobs_world.alpha, priority="low")
    urgent = submit(heavy, jobs_world.alpha, priority="high")
    assert admission_cycle() == [urgent.pk]
    order = list(
        Job.objects.filter(state=JobState.QUEUED).order_by("queue_position").values_list("pk", flat=True)
    )
    assert order == [light_later.pk, light_last.pk, heavy_first.pk, low.pk]
    heavy_first.refresh_from_db()
    assert heavy_first.queue_explanation["position_global"] == 3
    assert "ahead" in heavy_first.queue_explanation["sentence"] or heavy_first.queue_explanation["sentence"]


def test_a_4_gpu_job_waits_when_the_free_gpus_are_spread(jobs_world: World, fake_kube: FakeKube) -> None:
    occupy(fake_kube, "kwok-gpu-0", 2, "a")
    occupy(fake_kube, "kwok-gpu-1", 2, "b")
    job = submit(jobs_world.member, jobs_world.alpha, gpus=4)
    assert admission_cycle() == []
    job.refresh_from_db()
    assert job.queue_explanation["code"] == "no_node"
    assert "largest free block is 2" in job.queue_explanation["sentence"]
    fake_kube.objects.pop("/api/v1/namespaces/other/pods/b")
    assert admission_cycle() == [job.pk]


def test_quota_full_is_explained_and_a_grant_starts_the_job(jobs_world: World, fake_kube: FakeKube) -> None:
    Quota.objects.filter(project=jobs_world.alpha).update(gpus=2)
    first = submit(jobs_world.member, jobs_world.alpha, gpus=2)
    second = submit(jobs_world.member, jobs_world.alpha, gpus=2)
    assert admission_cycle() == [first.pk]
    second.refresh_from_db()
    assert second.queue_explanation["code"] == "quota"
    assert "2/2 GPUs" in second.queue_explanation["sentence"]
    assert any("grant of +2" in h for h in second.queue_explanation["hints"])
    now = timezone.now()
    grant = grants.grant_request(
        actor=jobs_world.member,
        project=jobs_world.alpha,
        gpus=2,
        until=now + timedelta(hours=2),
        reason="deadline",
    )
    assert admission_cycle() == []  # requested, not approved
    assert grants.grant_decide(actor=jobs_world.admin, grant=grant, approve=True)
    assert not grants.grant_decide(actor=jobs_world.admin, grant=grant, approve=False)
    assert admission_cycle() == [second.pk]
    assert grants.grants_expire(now=now + timedelta(hours=1)) == []
    assert grants.grants_expire(now=now + timedelta(hours=3)) == [grant.pk]
    grant.refresh_from_db()
    assert grant.status == GrantStatus.EXPIRED
    actions = set(AuditLog.objects.filter(object_id=str(grant.pk)).values_list("action", flat=True))
    assert {"grant.request", "grant.approve", "grant.expire"} <= actions


def test_a_borrower_is_preempted_with_notice_and_resumes(
    jobs_world: World,
    fake_kube: FakeKube,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    sent: list[tuple[int, str]] = capture_sends(monkeypatch, TaskName.NOTIFY_JOB)
    QueueSettings.objects.update_or_create(pk=1, defaults={"preemption_notice_s": 60})
    Quota.objects.filter(project__in=[jobs_world.alpha, jobs_world.beta]).update(gpus=4)
    own = submit(jobs_world.member, jobs_world.alpha, gpus=4, preemptible=True)
    borrower = submit(jobs_world.member, jobs_world.alpha, gpus=4, preemptible=True)
    assert admission_cycle() == [own.pk, borrower.pk]
    assert Job.objects.get(pk=borrower.pk).borrowing
    for job_id in (own.pk, borrower.pk):
        cluster_sync.job_reconcile(job_id=job_id, client=fake_kube)
    bind_pods(fake_kube)
    lender = submit(jobs_world.outsider, jobs_world.beta, gpus=4)
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert admission_cycle(client=fake_kube, now=now) == []
    assert [(j, k[:20]) for j, k in sent] == [(borrower.pk, "will be preempted at")]
    borrower.refresh_from_db()
    assert borrower.preempt_deadline == now + timedelta(seconds=60)
    assert borrower.state == JobState.ADMITTED
    lender.refresh_from_db()
    assert lender.queue_explanation["code"] == "reclaiming"
    with django_capture_on_commit_callbacks(execute=True):
        admission_cycle(client=fake_kube, now=now + timedelta(seconds=61))
    assert sent[-1][0] == borrower.pk
    assert "preempted" in sent[-1][1]
    borrower.refresh_from_db()
    assert borrower.state == JobState.PREEMPTED
    cluster_sync.job_reconcile(job_id=borrower.pk, client=fake_kube)
    assert fake_kube.objects[paths.job("gp-alpha", borrower.k8s_name)]["spec"]["suspend"] is True
    fake_kube.objects.pop(f"{paths.pods('gp-alpha')}/{borrower.k8s_name}-p")  # the pod goes
    assert admission_cycle(client=fake_kube, now=now + timedelta(seconds=62)) == [lender.pk]
    borrower.refresh_from_db()
    assert (borrower.state, borrower.queue_front) == (JobState.QUEUED, True)
    bind_pods(fake_kube)
    Job.objects.filter(pk=lender.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now())
    fake_kube.objects.pop(f"{paths.pods('gp-beta')}/{lender.k8s_name}-p")
    assert admission_cycle(client=fake_kube, now=now + timedelta(seconds=63)) == [borrower.pk]
    cluster_sync.job_reconcile(job_id=borrower.pk, client=fake_kube)
    assert fake_kube.objects[paths.job("gp-alpha", borrower.k8s_name)]["spec"]["suspend"] is False


def test_operators_hold_release_and_move_to_front(jobs_world: World, fake_kube: FakeKube) -> None:
    fake_kube.nodes = [fake_node("n0", gpus=1)]
    a, b = submit(jobs_world.member, jobs_world.alpha), submit(jobs_world.member, jobs_world.alpha)
    assert queue_services.queue_action(actor=jobs_world.admin, job_ids=[a.pk], action="hold") == 1
    assert admission_cycle() == [b.pk]
    a.refresh_from_db()
    assert a.queue_explanation["code"] == "held"
    with pytest.raises(Exception, match="operators"):
        queue_services.queue_action(actor=jobs_world.member, job_ids=[a.pk], action="release")
    c = submit(jobs_world.member, jobs_world.alpha)
    queue_services.queue_action(actor=jobs_world.admin, job_ids=[a.pk], action="release")
    queue_services.queue_action(actor=jobs_world.admin, job_ids=[c.pk], action="front")
    Job.objects.filter(pk=b.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now())
    assert admission_cycle() == [c.pk]


def _hard_gpus(fake: FakeKube, namespace: str) -> str:
    rq = fake.objects[paths.resource_quota(namespace, "portal-quota")]
    return str(rq["spec"]["hard"]["requests.nvidia.com/gpu"])


def test_resource_quota_counts_active_grants_and_admitted_borrowers(
    jobs_world: World,
    fake_kube: FakeKube,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from workloads.k8s import builders
    from workloads.k8s.reconcilers.namespace import ResourceQuotaReconciler
    from workloads.selectors import namespace_tenant

    refreshed: list[int] = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    capture_sends(monkeypatch, TaskName.NOTIFY_JOB)
    Quota.objects.filter(project__in=[jobs_world.alpha, jobs_world.beta]).update(gpus=2, mps_slices=4)
    alpha = jobs_world.alpha
    quota = Quota.objects.get(project=alpha)
    now = timezone.now()
    grant = grants.grant_request(
        actor=jobs_world.member, project=alpha, gpus=1, slices=2, until=now + timedelta(hours=2)
    )
    later = grants.grant_request(
        actor=jobs_world.member,
        project=alpha,
        gpus=5,
        starts_at=now + timedelta(hours=1),
        until=now + timedelta(hours=3),
    )
    assert ResourceQuotaReconciler(
        namespace_tenant(project=alpha), fake_kube
    ).desired() == builders.build_resource_quota(alpha, quota)
    with django_capture_on_commit_callbacks(execute=True):
        assert grants.grant_decide(actor=jobs_world.admin, grant=grant, approve=True)
        assert grants.grant_decide(actor=jobs_world.admin, grant=later, approve=True)  # not started: no GPUs
    assert refreshed == [alpha.pk, alpha.pk]
    own = submit(jobs_world.member, alpha, gpus=2)
    borrower = submit(jobs_world.member, alpha, gpus=2, preemptible=True)
    with django_capture_on_commit_callbacks(execute=True):
        assert admission_cycle() == [own.pk, borrower.pk]
    assert Job.objects.get(pk=borrower.pk).borrowing
    assert refreshed == [alpha.pk] * 3  # the borrower's admission
    assert ResourceQuotaReconciler(
        namespace_tenant(project=alpha), fake_kube
    ).desired() == builders.build_resource_quota(alpha, quota, extra_gpus=1 + 2, extra_slices=2)
    cluster_sync.job_reconcile(job_id=borrower.pk, client=fake_kube)  # un-suspend raises the quota first
    assert _hard_gpus(fake_kube, alpha.namespace) == "5"
    with django_capture_on_commit_callbacks(execute=True):
        services.job_cancel(actor=jobs_world.member, job=Job.objects.get(pk=borrower.pk))
    assert refreshed == [alpha.pk] * 4  # the borrower ended
    cluster_sync.namespace_reconcile(project_id=alpha.pk, client=fake_kube)
    assert _hard_gpus(fake_kube, alpha.namespace) == "3"
    assert grants.grants_started(since=now - timedelta(minutes=2), now=now + timedelta(minutes=61)) == [
        alpha.pk
    ]
    with django_capture_on_commit_callbacks(execute=True):
        assert sorted(grants.grants_expire(now=now + timedelta(hours=3))) == sorted([grant.pk, later.pk])
    assert refreshed[-1] == alpha.pk
    cluster_sync.namespace_reconcile(project_id=alpha.pk, client=fake_kube)
    assert _hard_gpus(fake_kube, alpha.namespace) == "2"


def test_the_real_node_serves_only_jobs_placed_there(jobs_world: World, fake_kube: FakeKube) -> None:
    """The local cluster's real node (tests, demo) is set apart: a real-node job goes there, and its
    GPUs never count for ordinary jobs. (A real-node job behind a blocked ordinary one waits, as
    any job behind the queue's head does.)"""
    real = fake_node("gpu-real-0", gpus=3)
    real["metadata"]["labels"][REAL_NODE_LABEL] = "true"
    fake_kube.nodes.append(real)
    for node in ("kwok-gpu-0", "kwok-gpu-1"):
        occupy(fake_kube, node, 4, f"full-{node}")
    with override_settings(GPUPORTAL_REAL_NODE_PLACEMENT=True):
        placed = submit(jobs_world.member, jobs_world.alpha, gpus=2, placement="real-node")
    # One GPU stays free on the real node, and this job would fit there if it were not set apart.
    ordinary = submit(jobs_world.member, jobs_world.alpha, gpus=1)
    admitted = admission_cycle()
    placed.refresh_from_db()
    assert admitted == [placed.pk], placed.queue_explanation
    assert placed.planned_node == "gpu-real-0"
    ordinary.refresh_from_db()
    assert (ordinary.state, ordinary.queue_explanation["code"]) == (JobState.QUEUED, "no_node")
