"""The portal's own processes lose Postgres, Redis (restarted empty) or the Kubernetes API
server; nothing is lost, duplicated or wrongly failed, and the API answers 503 without a trace.
The scheduled sweep (celery beat) does the catching up: the test only submits and looks.

CI size: 20 s outages and 8 jobs. `make soak` (GPUPORTAL_SOAK=1): Postgres and Redis 5 min, the API
server 10 min, 40 jobs, as docs/reliability.md asks. The recovery time (link back -> every job
settled) is printed; the promise (docs/reliability.md) is at most one sweep + 60 s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from accounts.choices import TokenScope
from accounts.services import token_create
from deploy.localcluster import ClusterHandle
from tests.fixtures.personas import World
from tests.workloads_e2e.outage_stack import SWEEP_S, Stack, portal_stack
from tests.workloads_e2e.procs import wait_for
from tests.workloads_e2e.r2 import assert_portal_matches_cluster, assert_timelines_whole
from tests.workloads_e2e.sizes import SOAK
from workloads.choices import JobState
from workloads.k8s.client import RealKubeClient
from workloads.models import Job, JobEvent, ReconcileOutbox
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
POSTGRES_DOWN_S = REDIS_DOWN_S = 300 if SOAK else 20
APISERVER_DOWN_S = 600 if SOAK else 20
JOBS = 40 if SOAK else 8
BODY = {
    "project": "alpha",
    "image": IMAGE,
    "cpu_millicores": 100,
    "memory_mib": 64,
    "simulate": {"run_seconds": 3},
}


class Api:
    def __init__(self, stack: Stack, token: str) -> None:
        self.http = httpx.Client(base_url=stack.web, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def submit(self) -> httpx.Response:
        return self.http.post("/api/v1/jobs/", json=BODY)

    def created(self) -> httpx.Response | None:
        answer = self.submit()
        return answer if answer.status_code == 201 else None

    def submit_ok(self, n: int) -> list[str]:
        # The first requests after a link returns may still meet a dead pooled connection.
        return [str(wait_for(self.created, 30, "a 201", every=1).json()["id"]) for _ in range(n)]


def _prepare(world: World) -> str:
    allow_images(world.alpha)
    world.alpha.quota.max_concurrent_jobs = JOBS
    world.alpha.quota.save()
    _, secret = token_create(
        user=world.member, name="drill", scopes=[TokenScope.READ, TokenScope.SUBMIT], expires_at=None
    )
    return secret


def _settled(uids: list[str]) -> bool:
    states = set(Job.objects.filter(uid__in=uids).values_list("state", flat=True))
    return states == {JobState.SUCCEEDED}


def _assert_nothing_lost_or_doubled(kube: RealKubeClient, uids: list[str]) -> None:
    assert sorted(str(u) for u in Job.objects.values_list("uid", flat=True)) == sorted(uids), "a row per 201"
    assert_portal_matches_cluster(kube)  # R2: one Job each, no orphans, the same states
    assert_timelines_whole()
    wrong = JobEvent.objects.filter(to_state__in=[JobState.FAILED, JobState.LOST, JobState.UNKNOWN])
    assert not wrong.exists(), list(wrong.values_list("job__uid", "to_state", "reason"))
    assert not ReconcileOutbox.objects.exists()


def _recover(uids: list[str], what: str, show: Callable[[str], None]) -> float:
    back = time.monotonic()
    wait_for(
        lambda: _settled(uids), SWEEP_S + 60 + 180, f"every job settled after the {what} outage", every=2
    )
    recovery = time.monotonic() - back
    show(f"T08 {what}: recovery {recovery:.1f} s (promise: sweep {SWEEP_S} s + 60 s)")
    return recovery


@contextlib.contextmanager
def _drill(
    world: World, k8s_cluster: ClusterHandle, tmp_path: Path
) -> Iterator[tuple[Stack, Api, list[str]]]:
    """The whole stack up, and the first half of the jobs submitted before the outage."""
    token = _prepare(world)
    with portal_stack(k8s_cluster, tmp_path) as stack:
        api = Api(stack, token)
        yield stack, api, api.submit_ok(JOBS // 2)


def _all_made(uids: list[str]) -> bool:
    return not Job.objects.filter(uid__in=uids, created_in_cluster_at=None).exists()


def _for(seconds: float, every: float, step: Callable[[], None]) -> None:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        step()
        time.sleep(every)


def test_a_postgres_outage_loses_nothing_and_answers_503(
    world: World,
    kube: RealKubeClient,
    k8s_cluster: ClusterHandle,
    tmp_path: Path,
    figures: Callable[[str], None],
) -> None:
    refused: list[httpx.Response] = []

    def probe(api: Api) -> None:
        refused.append(api.submit())
        assert api.http.get("/healthz").status_code == 200  # the process lives; readiness says why
        assert api.http.get("/readyz").status_code == 503

    with _drill(world, k8s_cluster, tmp_path) as (stack, api, uids):
        stack.postgres.down()
        _for(POSTGRES_DOWN_S, 2, lambda: probe(api))
        stack.postgres.up()
        uids += api.submit_ok(JOBS - JOBS // 2)
        _recover(uids, "Postgres", figures)
    assert {r.status_code for r in refused} == {503}, refused[0].text[:2000]
    for answer in refused:
        assert answer.headers["content-type"].startswith("application/json")
        assert "Traceback" not in answer.text
        assert "database" in answer.json()["error"]["message"].lower()
    _assert_nothing_lost_or_doubled(kube, uids)


def test_an_api_server_outage_loses_nothing_and_fails_nothing(
    world: World,
    kube: RealKubeClient,
    k8s_cluster: ClusterHandle,
    tmp_path: Path,
    figures: Callable[[str], None],
) -> None:
    with _drill(world, k8s_cluster, tmp_path) as (stack, api, uids):
        wait_for(lambda: _all_made(uids), 120, "Jobs made")
        stack.apiserver.down()
        # Submissions need only Postgres.
        _for(APISERVER_DOWN_S, 2, lambda: uids.extend(api.submit_ok(1) if len(uids) < JOBS else []))
        stack.apiserver.up()
        _recover(uids, "API server", figures)
    _assert_nothing_lost_or_doubled(kube, uids)


def test_a_redis_outage_loses_nothing_and_submissions_go_on(
    world: World,
    kube: RealKubeClient,
    k8s_cluster: ClusterHandle,
    tmp_path: Path,
    figures: Callable[[str], None],
) -> None:
    during: list[str] = []
    with _drill(world, k8s_cluster, tmp_path) as (stack, api, uids):
        # The worker connected and working first: an outage that begins while the worker is still
        # starting tests its first connect, not the reconnect of a running worker.
        wait_for(lambda: _all_made(uids), 120, "Jobs made")
        stack.redis.stop()
        # The intent is in the outbox, written in the submit transaction.
        _for(
            REDIS_DOWN_S, max(1.0, REDIS_DOWN_S / (JOBS - JOBS // 2)), lambda: during.extend(api.submit_ok(1))
        )
        assert ReconcileOutbox.objects.filter(job__uid__in=during).count() == len(during)
        stack.redis.start()  # empty: every queued task and result is gone
        uids += during
        _recover(uids, "Redis", figures)
        figures(f"T08 Redis: the worker was restarted {stack.worker.restarts} time(s)")
    _assert_nothing_lost_or_doubled(kube, uids)
    # The controller's event watch fed the timelines with the cluster's own events.
    reasons = set(JobEvent.objects.filter(kind="k8s").values_list("reason", flat=True))
    assert {"Scheduled", "SuccessfulCreate"} & reasons, reasons
