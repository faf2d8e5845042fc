"""The admission cycle through the database (fake cluster): borrowed MPS slices are reclaimed with
notice like whole GPUs, and a grant of one GPU type raises that type's limit (request, 400 on an
unknown type, approval, admission)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import GpuTypeLimit, Quota, User
from gpu.choices import SharingMode
from gpu.models import Gpu, Node
from gpu.tests.factories import make_gpus, make_node
from tests.fixtures.personas import World
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState, TaskName
from workloads.k8s import paths
from workloads.models import Job, QueueSettings, QuotaGrant
from workloads.services import cluster_sync, grants
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, capture_sends
from workloads.tests.fakes import FakeKube, fake_node

pytestmark = pytest.mark.django_db
RTX = "NVIDIA-GeForce-RTX-5090"  # the fake nodes' product label


def submit(user: User, project: Any, **spec: Any) -> Job:
    return services.job_submit(actor=user, project=project, data={"image": IMAGE, **spec})


def bind(fake: FakeKube, job: Job) -> None:
    """What the scheduler does for an admitted job: a bound pod asking its GPUs or MPS slices."""
    job.refresh_from_db()
    resource = ("nvidia.com/gpu.shared", job.mps_slices) if job.mps_slices else ("nvidia.com/gpu", job.gpus)
    fake.objects[f"{paths.pods(job.namespace)}/{job.k8s_name}-p"] = {
        "metadata": {
            "name": f"{job.k8s_name}-p",
            "namespace": job.namespace,
            "labels": {"gpuportal.dev/job-uid": str(job.uid), "gpuportal.dev/project": job.project.slug},
        },
        "spec": {"nodeName": job.planned_node, "containers": [{"resources": {"requests": dict([resource])}}]},
        "status": {"phase": "Running"},
    }


def test_a_slice_borrower_is_preempted_with_notice_for_the_lender(
    jobs_world: World,
    fake_kube: FakeKube,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    sent: list[tuple[int, str]] = capture_sends(monkeypatch, TaskName.NOTIFY_JOB)
    QueueSettings.objects.update_or_create(pk=1, defaults={"preemption_notice_s": 60})
    fake_kube.nodes = [fake_node("n0", gpus=0, slices=8)]  # two shared GPUs of 4 slices
    _shared_gpus("n0", cross_project=True)  # lender and borrowers side by side on one node
    Quota.objects.filter(project=jobs_world.alpha).update(mps_slices=2)
    Quota.objects.filter(project=jobs_world.beta).update(mps_slices=4)
    now = timezone.now()
    alpha = [
        submit(jobs_world.member, jobs_world.alpha, gpus=0, mps_slices=2, preemptible=True) for _ in "ab"
    ]
    assert admission_cycle(client=fake_kube, now=now) == [j.pk for j in alpha]  # in quota, then borrowing
    borrower = submit(jobs_world.member, jobs_world.alpha, gpus=0, mps_slices=2, preemptible=True)
    assert admission_cycle(client=fake_kube, now=now + timedelta(seconds=1)) == [borrower.pk]
    assert list(
        Job.objects.filter(pk__in=[j.pk for j in alpha] + [borrower.pk])
        .values_list("borrowing", flat=True)
        .order_by("pk")
    ) == [False, True, True]
    for job in (*alpha, borrower):
        cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
        bind(fake_kube, job)
    lender = submit(jobs_world.outsider, jobs_world.beta, gpus=0, mps_slices=4)
    with django_capture_on_commit_callbacks(execute=True):
        assert admission_cycle(client=fake_kube, now=now + timedelta(seconds=1)) == []
    assert [(j, k[:20]) for j, k in sent] == [(borrower.pk, "will be preempted at")]
    borrower.refresh_from_db()
    deadline = now + timedelta(seconds=61)
    assert (borrower.state, borrower.preempt_deadline, borrower.preempt_for) == (
        JobState.ADMITTED,
        deadline,
        lender.pk,
    )
    lender.refresh_from_db()
    exp = lender.queue_explanation
    assert exp["code"] == "reclaiming"
    # 2 slices free plus the youngest borrower's 2 cover the 4; the older borrower keeps its slices.
    assert exp["sentence"].startswith("waiting for 2 borrowed slices to be returned (notice ends")
    assert datetime.fromisoformat(exp["estimated_start"]) == deadline  # its slices come back then
    with django_capture_on_commit_callbacks(execute=True):
        assert admission_cycle(client=fake_kube, now=deadline) == []
    assert Job.objects.get(pk=borrower.pk).state == JobState.PREEMPTED
    fake_kube.objects.pop(f"{paths.pods(borrower.namespace)}/{borrower.k8s_name}-p")  # the pod goes
    assert admission_cycle(client=fake_kube, now=deadline + timedelta(seconds=1)) == [lender.pk]
    borrower.refresh_from_db()
    assert (borrower.state, borrower.queue_front) == (JobState.QUEUED, True)


def _shared_gpus(node: str, *, cross_project: bool) -> None:
    gpus = make_gpus(make_node(node, gpus=2), 2)
    Gpu.objects.filter(pk__in=[g.pk for g in gpus]).update(
        sharing_mode=SharingMode.SHARED, slices=4, cross_project=cross_project
    )


def test_a_lender_takes_back_a_one_project_node_only_from_borrowers_alone(
    jobs_world: World, fake_kube: FakeKube, django_capture_on_commit_callbacks: Any
) -> None:
    """One project per shared node: all of the borrowing project's jobs there get notice (even
    those the lender's slices would not need), and none while it also runs a job in its own quota."""
    QueueSettings.objects.update_or_create(pk=1, defaults={"preemption_notice_s": 60})
    fake_kube.nodes = [fake_node("n0", gpus=0, slices=8)]
    _shared_gpus("n0", cross_project=False)
    Quota.objects.filter(project=jobs_world.alpha).update(mps_slices=2)
    Quota.objects.filter(project=jobs_world.beta).update(mps_slices=4)
    now = timezone.now()
    borrowers = [
        submit(jobs_world.member, jobs_world.alpha, gpus=0, mps_slices=2, preemptible=True) for _ in "ab"
    ]
    Quota.objects.filter(project=jobs_world.alpha).update(mps_slices=0)  # both run on beta's quota
    assert admission_cycle(client=fake_kube, now=now) == [j.pk for j in borrowers]
    for job in borrowers:
        cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
        bind(fake_kube, job)
    lender = submit(jobs_world.outsider, jobs_world.beta, gpus=0, mps_slices=2)  # 4 slices are free
    with django_capture_on_commit_callbacks(execute=True):
        assert admission_cycle(client=fake_kube, now=now + timedelta(seconds=1)) == []
    noticed = Job.objects.filter(preempt_for=lender.pk).values_list("pk", flat=True)
    assert sorted(noticed) == sorted(j.pk for j in borrowers)
    lender.refresh_from_db()
    assert lender.queue_explanation["code"] == "reclaiming"

    Quota.objects.filter(project=jobs_world.alpha).update(mps_slices=2)  # now one of them is in quota
    Job.objects.filter(pk=borrowers[0].pk).update(borrowing=False)
    Job.objects.filter(pk__in=[j.pk for j in borrowers]).update(
        preempt_deadline=None, preempt_notice_at=None, preempt_for=None
    )
    assert admission_cycle(client=fake_kube, now=now + timedelta(seconds=2)) == []
    lender.refresh_from_db()
    assert lender.queue_explanation["code"] == "slices_held"
    assert not Job.objects.filter(preempt_for=lender.pk).exists()


def _typed_world(world: World, fake: FakeKube) -> Job:
    """alpha may use 2 RTX 5090 and runs 2 of them; a third job asks 2 more."""
    fake.nodes = [fake_node("n0", gpus=4, slices=0)]
    Node.objects.create(name="n0", gpu_model=RTX)
    GpuTypeLimit.objects.create(quota=Quota.objects.get(project=world.alpha), gpu_type=RTX, gpus=2)
    running = submit(world.member, world.alpha, gpus=2, gpu_type=RTX)
    assert admission_cycle(client=fake) == [running.pk]
    bind(fake, running)
    return submit(world.member, world.alpha, gpus=2, gpu_type=RTX)


def test_a_typed_grant_raises_the_type_limit_through_the_api(jobs_world: World, fake_kube: FakeKube) -> None:
    waiting = _typed_world(jobs_world, fake_kube)
    assert admission_cycle(client=fake_kube) == []
    waiting.refresh_from_db()
    assert waiting.queue_explanation["code"] == "quota_type"
    assert f"a temporary grant of +2 {RTX} would start it now" in waiting.queue_explanation["hints"]
    web = Client()
    web.force_login(jobs_world.member)
    until = (timezone.now() + timedelta(hours=2)).isoformat()
    body = {"project": "alpha", "gpus": 2, "gpu_type": "H100", "until": until}
    refused = web.post("/api/v1/grants/", body, content_type="application/json")
    assert refused.status_code == 400
    assert f"Unknown GPU type 'H100': the cluster's GPU types are {RTX}." in str(refused.json())
    made = web.post("/api/v1/grants/", {**body, "gpu_type": RTX}, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["gpu_type"] == RTX
    assert web.get("/api/v1/grants/").json()["results"][0]["gpu_type"] == RTX
    grant = QuotaGrant.objects.get(pk=made.json()["id"])
    assert grants.grant_decide(actor=jobs_world.admin, grant=grant, approve=True)
    assert admission_cycle(client=fake_kube) == [waiting.pk]


def test_an_untyped_grant_does_not_lift_the_type_limit(jobs_world: World, fake_kube: FakeKube) -> None:
    waiting = _typed_world(jobs_world, fake_kube)
    grant = grants.grant_request(
        actor=jobs_world.member, project=jobs_world.alpha, gpus=2, until=timezone.now() + timedelta(hours=1)
    )
    assert grants.grant_decide(actor=jobs_world.admin, grant=grant, approve=True)
    assert admission_cycle(client=fake_kube) == []
    waiting.refresh_from_db()
    assert waiting.queue_explanation["sentence"] == f"project limit for {RTX} 2/2 GPUs in use"
