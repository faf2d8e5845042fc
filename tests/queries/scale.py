"""Rows that grow: `grow(fixed, k)` adds k of everything a list or detail endpoint shows (jobs with
events, projects with members, nodes with GPUs, tokens, templates, grants, usage), visible to both
the member and the operator, and k more children under the fixed objects the detail endpoints read."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from accounts.choices import Role, TokenScope
from accounts.models import ApiToken, Membership, Project, ProjectWebhook, Quota, User, WebhookDelivery
from gpu.models import Gpu, Node
from tests.fixtures.personas import World
from workloads.choices import EventKind, JobState
from workloads.models import Job, JobEvent, JobTemplate, QuotaGrant

_serial = itertools.count()
IMAGE = "registry.example.org/train:1"
SPEC = {"image": IMAGE, "gpus": 1}
STATES = [JobState.QUEUED, JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED]


@dataclass
class Fixed:
    """The objects detail endpoints read; their children grow with every `grow`."""

    world: World
    job: Job
    node: Node
    template: JobTemplate
    webhook: ProjectWebhook  # of a project the member manages; its deliveries grow


def fixed(world: World) -> Fixed:
    job = _job(world.alpha, world.member, JobState.SUCCEEDED)
    job.log_tail, job.log_captured = "done\n", True
    job.save(update_fields=["log_tail", "log_captured"])
    node = Node.objects.create(name="fixed-node", gpu_count=0)
    template = JobTemplate.objects.create(project=world.alpha, name="fixed", spec=SPEC)
    hooked = Project.objects.create(slug="hooked", name="Hooked")
    Membership.objects.create(project=hooked, user=world.member, role=Role.MANAGER)
    webhook = ProjectWebhook.objects.create(
        project=hooked, url="https://hooks.example.org/x", secret="s" * 64
    )
    return Fixed(world, job, node, template, webhook)


def grow(fx: Fixed, k: int) -> None:
    w = fx.world
    for _ in range(k):
        n = next(_serial)
        for owner in (w.member, w.owner):
            job = _job(w.alpha, owner, STATES[n % len(STATES)])
            _events(job, 2)
        _job(w.beta, w.outsider, STATES[n % len(STATES)])  # the operator sees it too
        _project(n, w.member)
        _job(w.alpha, _user_in(w.alpha, f"grown{n}@example.com"), JobState.SUCCEEDED)  # usage per user
        _node(f"grown-node-{n}", 4)
        for user in (w.member, w.admin):
            _token(user, n)
        JobTemplate.objects.create(project=w.alpha, name=f"t{n}", spec=SPEC, created_by=w.member)
        QuotaGrant.objects.create(
            project=w.alpha, requested_by=w.member, gpus=1, until=timezone.now() + timedelta(days=1)
        )
    _events(fx.job, k)
    _gpus(fx.node, k)
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(webhook=fx.webhook, event="job.running", payload={}, attempts=i % 2) for i in range(k)
    )


def _job(project: Project, owner: User, state: str) -> Job:
    now = timezone.now()
    started = now - timedelta(hours=30) if state != JobState.QUEUED else None
    finished = now - timedelta(hours=1) if state in (JobState.SUCCEEDED, JobState.FAILED) else None
    return Job.objects.create(
        project=project,
        owner=owner,
        image=IMAGE,
        gpus=1,
        state=state,
        started_at=started,
        finished_at=finished,
        queue_explanation={"code": "quota", "reason": "waiting"},
        node="n1",
    )


def _events(job: Job, k: int) -> None:
    JobEvent.objects.bulk_create(
        JobEvent(job=job, kind=EventKind.TRANSITION, from_state="queued", to_state="running", reason=f"r{i}")
        for i in range(k)
    )


def _project(n: int, member: User) -> None:
    project = Project.objects.create(slug=f"grown-{n}", name=f"Grown {n}")
    Quota.objects.create(project=project, gpus=4)
    Membership.objects.create(project=project, user=member, role=Role.MEMBER)
    _user_in(project, f"peer{n}@example.com")


def _user_in(project: Project, email: str) -> User:
    user = User.objects.create_user(username=email.split("@")[0], email=email)
    Membership.objects.create(project=project, user=user, role=Role.VIEWER)
    return user


def _node(name: str, gpus: int) -> None:
    _gpus(Node.objects.create(name=name, gpu_count=gpus), gpus)


def _gpus(node: Node, k: int) -> None:
    start = node.gpus.count()
    Gpu.objects.bulk_create(
        Gpu(node=node, index=start + i, uuid=f"GPU-{node.name}-{start + i}") for i in range(k)
    )


def _token(user: User, n: int) -> None:
    ApiToken.objects.create(
        user=user, name=f"t{n}", prefix=f"p{n}{user.pk}x", digest=f"d{n}-{user.pk}", scopes=[TokenScope.READ]
    )
