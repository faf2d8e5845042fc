"""B9's rows, bulk-created straight into the portal's own tables (no Kubernetes round trips):
users, projects with members and quotas, nodes with GPUs, jobs in every state, and one API token per
client. Returns what the clients need: their token, the uids of jobs they may read, their page count."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from bench.common import log

if TYPE_CHECKING:  # Django is set up only once the bench database exists
    from accounts.models import Project, User

GPUS_PER_NODE = 4
USERS_PER_PROJECT = 10
BATCH = 2000


@dataclass(frozen=True)
class Seat:
    """One API client: its token, some job uids it can see, and its pages of 100."""

    secret: str
    operator: bool
    uids: list[str]
    pages: int


def seed(*, jobs: int, nodes: int, users: int, clients: int) -> list[Seat]:
    people = _users(users)
    projects = _projects(people)
    _nodes(nodes)
    _jobs(jobs, projects)
    seats = [_seat(people[i], operator=i % 10 == 0) for i in range(clients)]
    _analyze()
    return seats


def _analyze() -> None:
    """Statistics for the rows just loaded, as a live database has them. Without this the first
    minute ran on no statistics until autovacuum's ANALYZE came round (its naptime is a minute),
    and whether that fell inside the timed load decided the run: an operator's page planned as a
    sort of every job joined to its project and owner took 56 ms where it takes 6 (2026-12-06)."""
    from django.db import connection

    with connection.cursor() as cursor:  # B9 runs on Postgres only (bench_database)
        cursor.execute("ANALYZE")


def _users(count: int) -> list[User]:
    from allauth.mfa.models import Authenticator

    from accounts.models import User

    rows = [
        User(username=f"b9-u{i}", email=f"b9-u{i}@example.com", is_staff=i % 10 == 0) for i in range(count)
    ]
    for row in rows:
        row.set_unusable_password()
    people = User.objects.bulk_create(rows)
    # Operators are staff with a second factor that counts (accounts.selectors.is_operator).
    factors = Authenticator.objects.bulk_create(
        Authenticator(user=u, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"})
        for u in people
        if u.is_staff
    )
    for factor in factors:
        User.objects.filter(pk=factor.user_id).update(operator_factor=factor)
    return list(User.objects.filter(pk__in=[u.pk for u in people]).order_by("pk"))


def _projects(people: list[User]) -> list[tuple[Project, list[User]]]:
    """A project per 10 users; each user is in two neighbouring projects."""
    from accounts.choices import Role
    from accounts.models import Membership, Project, Quota

    count = max(1, len(people) // USERS_PER_PROJECT)
    projects = Project.objects.bulk_create(Project(slug=f"b9-p{p}", name=f"B9 {p}") for p in range(count))
    Quota.objects.bulk_create(Quota(project=p, gpus=64) for p in projects)
    members: dict[int, list[User]] = {p: [] for p in range(count)}
    for i, user in enumerate(people):
        for p in {(i // USERS_PER_PROJECT) % count, (i // USERS_PER_PROJECT + 1) % count}:
            members[p].append(user)
    Membership.objects.bulk_create(
        Membership(project=projects[p], user=u, role=Role.MEMBER) for p, us in members.items() for u in us
    )
    return [(projects[p], members[p]) for p in range(count)]


def _nodes(count: int) -> None:
    from gpu.models import Gpu, Node

    made = Node.objects.bulk_create(
        Node(
            name=f"b9-node-{n:04d}",
            gpu_model="NVIDIA-GeForce-RTX-5090",
            gpu_count=GPUS_PER_NODE,
            capacity={"nvidia.com/gpu": "4"},
            allocatable={"nvidia.com/gpu": "4"},
        )
        for n in range(count)
    )
    Gpu.objects.bulk_create(
        (
            Gpu(node=node, index=i, uuid=f"GPU-{node.name}-{i}", model="RTX 5090", memory_mib=32768)
            for node in made
            for i in range(GPUS_PER_NODE)
        ),
        batch_size=BATCH,
    )


def _jobs(count: int, projects: list[tuple[Project, list[User]]]) -> None:
    from django.utils import timezone

    from workloads.choices import JobState
    from workloads.models import Job

    states = [JobState.SUCCEEDED, JobState.SUCCEEDED, JobState.FAILED, JobState.RUNNING, JobState.QUEUED]
    now = timezone.now()
    rows = []
    for j in range(count):
        project, members = projects[j % len(projects)]
        state = states[j % len(states)]
        submitted = now - timedelta(minutes=count - j)
        rows.append(
            Job(
                project=project,
                owner=members[j % len(members)],
                name=f"b9-{j}",
                image="registry.example.org/train:1",
                command=["python", "train.py"],
                gpus=1 + j % 4,
                state=state,
                submitted_at=submitted,
                state_changed_at=submitted,
                started_at=None if state == JobState.QUEUED else submitted + timedelta(seconds=5),
                finished_at=submitted + timedelta(minutes=30)
                if state in (JobState.SUCCEEDED, JobState.FAILED)
                else None,
                node=f"b9-node-{j % 1000:04d}",
                queue_explanation={"code": "quota", "reason": "waiting"},
            )
        )
    Job.objects.bulk_create(rows, batch_size=BATCH)
    log(f"B9: {count} jobs in {len(projects)} projects")


def _seat(user: User, *, operator: bool) -> Seat:
    from accounts import services
    from accounts.choices import TokenScope
    from workloads.selectors import job_list

    _, secret = services.token_create(user=user, name="b9", scopes=[TokenScope.READ], expires_at=None)
    visible = job_list(user=user)
    uids = [str(u) for u in visible.values_list("uid", flat=True)[:500]]
    return Seat(secret, operator, uids, max(1, min(20, visible.count() // 100)))
