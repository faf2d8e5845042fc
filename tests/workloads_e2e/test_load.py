"""The portal under load, with Locust (docs/reliability.md).

Many users (10 projects, 5-15 s between each user's actions) against the whole portal as separate
processes (uvicorn as the chart runs it, two web processes for its two replicas, Celery worker and
beat, the controller) on the real Postgres, Redis and local cluster: job list and detail reads,
project reads, submits of one-GPU jobs, log tails, and each user's live jobs socket. The figures
(p95 per kind, errors, socket connects, socket lag) are printed; the test asserts only behaviour:
every kind of request was made, HTTP errors stay under 0.1 %, socket messages arrived, and
afterwards every portal job has exactly one Kubernetes Job.
50 users for 2 minutes in `make test`; 200 users for 10 minutes in `make soak` (GPUPORTAL_SOAK=1).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from accounts.choices import Role, TokenScope
from accounts.models import Membership, Project, Quota, User
from accounts.services import token_create
from bench import cpu
from deploy.localcluster import ClusterHandle
from tests.fixtures.personas import make_user
from tests.workloads_e2e.conftest import cluster_jobs, drop_namespaces
from tests.workloads_e2e.outage_stack import DRILL_SECRET_KEY, portal_stack
from tests.workloads_e2e.procs import REPO, wait_for
from tests.workloads_e2e.sizes import SOAK
from workloads.k8s.client import RealKubeClient
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
USERS, PROJECTS = (200 if SOAK else 50), 10
RUN_S = 600 if SOAK else 120
KINDS = ("read: jobs list", "read: job", "read: projects", "submit", "log tail", "socket lag")
SHOWN = (*KINDS, "connect", "Aggregated")


def _identities(tmp_path: Path) -> tuple[Path, list[Project]]:
    """USERS members over PROJECTS projects, each with a token, a session cookie valid for the
    stack's secret key, and a job of its own to read."""
    out, projects = [], []
    for p in range(PROJECTS):
        project = Project.objects.create(slug=f"load{p}", name=f"Load {p}")
        Quota.objects.create(project=project, gpus=4, max_concurrent_jobs=4)
        allow_images(project)
        projects.append(project)
    for n in range(USERS):
        project = projects[n % PROJECTS]
        user = make_user(f"load{n}@example.com")
        Membership.objects.create(project=project, user=user, role=Role.MEMBER)
        out.append(_identity(user, project))
    path = tmp_path / "identities.json"
    path.write_text(json.dumps(out))
    return path, projects


def _identity(user: User, project: Project) -> dict[str, Any]:
    _, token = token_create(
        user=user, name="t12", scopes=[TokenScope.READ, TokenScope.SUBMIT], expires_at=None
    )
    client = Client()
    with override_settings(SECRET_KEY=DRILL_SECRET_KEY):  # the web process must accept the session
        client.force_login(user)
    spec = {
        "image": IMAGE,
        "gpus": 1,
        "cpu_millicores": 100,
        "memory_mib": 64,
        "simulate": {"run_seconds": 20},
    }
    jobs = [str(services.job_submit(actor=user, project=project, data=spec).uid)]
    return {
        "token": token,
        "session": client.cookies["sessionid"].value,
        "project": project.slug,
        "jobs": jobs,
    }


def _stats(prefix: Path) -> dict[str, dict[str, str]]:
    with (prefix.parent / f"{prefix.name}_stats.csv").open() as f:
        return {row["Name"]: row for row in csv.DictReader(f)}


def _table(stats: dict[str, dict[str, str]]) -> str:
    lines = [f"T12: {USERS} users, {RUN_S} s"]
    lines.append(f"{'kind':<18}{'requests':>10}{'failures':>10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for name in SHOWN:
        row = stats.get(name)
        if row:
            lines.append(
                f"{name:<18}{row['Request Count']:>10}{row['Failure Count']:>10}"
                f"{row['50%']:>9}{row['95%']:>9}{row['99%']:>9}"
            )
    lines.append("goals: reads p95 < 300 ms, submit p95 < 1000 ms, errors < 0.1 %, socket lag p95 < 2000 ms")
    return "\n".join(lines)


@pytest.mark.timeout(RUN_S + 420)  # set-up (200 users, 400 jobs) and teardown come on top of the run
def test_many_users_read_submit_tail_and_watch_live(
    k8s_cluster: ClusterHandle, kube: RealKubeClient, tmp_path: Path, figures: Callable[[str], None]
) -> None:
    identities, projects = _identities(tmp_path)
    before = set(Job.objects.values_list("uid", flat=True))
    prefix = tmp_path / "t12"
    try:
        with portal_stack(k8s_cluster, tmp_path, server="uvicorn", direct=True) as stack:
            locustfile = str(Path(__file__).with_name("load_locustfile.py"))
            locust = [
                str(Path(sys.executable).parent / "locust"),
                "-f",
                locustfile,
                "--headless",
                "-u",
                str(USERS),
                "-r",
                "20",
                "-t",
                f"{RUN_S}s",
                "--host",
                stack.web,
                "--csv",
                str(prefix),
                "--only-summary",
                "--stop-timeout",
                "10",
            ]
            env = {"LOAD_TEST_IDENTITIES": str(identities), "PATH": "/usr/bin:/bin"}
            proc = subprocess.Popen(
                locust, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            time.sleep(1)  # exec'd, so the first snapshot knows it as the load generator
            before_cpu, started = cpu.snapshot(), time.monotonic()
            try:
                _, stderr = proc.communicate(timeout=RUN_S + 180)
            finally:
                proc.kill()  # a no-op once it ended; a run past its time must not outlive the test
            spent: dict[str, float] = {}
            cpu.spent(before_cpu, cpu.snapshot(), spent)
            stats = _stats(prefix)
            # With what the two cores did meanwhile: the profile that says what bounds a missed goal.
            figures(f"{_table(stats)}\nCPU during the run: {cpu.describe(spent, time.monotonic() - started)}")
            for kind in KINDS:
                assert int(stats.get(kind, {}).get("Request Count", 0)) > 0, (kind, stderr[-2000:])
            http = [stats[k] for k in KINDS if k != "socket lag"]
            failed = sum(int(r["Failure Count"]) for r in http)
            asked = sum(int(r["Request Count"]) for r in http)
            # HTTP answers must hold (< 0.1 % errors); socket connects that time out on this 2-core
            # machine are printed as figures (the "connect" row), the goal is judged in the note.
            assert failed <= 0.001 * asked, stderr[-3000:]
            made = set(Job.objects.values_list("uid", flat=True)) - before
            assert made, "no submit was accepted"
            wait_for(lambda: _one_job_each(kube, projects), 180, "one Kubernetes Job per portal job", every=2)
    finally:
        drop_namespaces(kube, tuple(p.namespace for p in projects), timeout_s=300)


def _one_job_each(kube: RealKubeClient, projects: list[Project]) -> bool:
    """R2's check: the cluster's Jobs, listed by label, are the portal's jobs one to one."""
    for project in projects:
        portal = sorted(str(u) for u in Job.objects.filter(project=project).values_list("uid", flat=True))
        labelled = [
            o["metadata"]["labels"]["gpuportal.dev/job-uid"] for o in cluster_jobs(kube, project.namespace)
        ]
        if sorted(labelled) != portal:
            return False
    return True
