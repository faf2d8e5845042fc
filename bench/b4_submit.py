"""B4: submit -> Running through the portal, against the same pods created straight in the API server.

Ours: the portal's processes as the chart runs them, production settings: its 2 web replicas (each a
uvicorn of one worker, the clients dealt evenly between them as a Service does), a Celery worker of
concurrency 4, beat, `manage.py controller` (its default 2 s admission tick), a throwaway Postgres
database (`<db>_b4`), a private Redis; a local cluster of kwok GPU nodes (4 x nvidia.com/gpu each).
`clients` threads, each a project member with a personal token, POST one-GPU simulated jobs to
/api/v1/jobs/ back to back. Reference, in the same run on the same cluster before the portal starts: as
many pods asking what a portal job's pod asks (nvidia.com/gpu: 1, the same CPU and memory), POSTed to
the kube-apiserver by as many threads (what `kubectl create` sends).

Fairness, in waves: jobs that end by themselves would let capacity set the pace (the faster side would
queue for GPUs, flattering the slower one). A wave is at most as many jobs as the cluster has GPUs,
each holding its GPU (a simulated run of HOLD_S) until the whole wave runs; then it is cleared,
untimed (portal jobs cancelled through the API by their owners, reference pods deleted); the next
starts once every pod is gone and the portal's task queues are empty (the clearing's reconciles must
not run inside the next wave). Nothing waits for a GPU: time to Running is each path's own cost.
An untimed warm-up wave (a job per client) opens each side: the portal makes its namespace then.

Running: the pod's phase as one pod watch in this process sees it (one observer for both sides), keyed
by the job-uid label or the pod's name; latency runs from the 201 answer. Throughput: jobs / the sum of
the waves' spans (first POST sent -> last pod Running). The watch also sums, per node, the GPU requests
of bound pods not ended (deleting ones too: they hold the GPU until gone) and keeps the largest excess
over the node's capacity seen at any event. The portal's own RUNNING record is reported beside.
`measure(size)` runs one size; `run` the profile's (SIZES), `run_sizes` three (STEPS), fresh each time.
"""

from __future__ import annotations

import http.client
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import redis
from kubernetes.client import ApiClient

from bench import apicalls
from bench import cpu as cpu_use
from bench.b1_sync import bare_pod, bench_cluster
from bench.b4_jobs import KubeJobs, job_rows
from bench.b4_watch import PodWatch, capacity_of, pod_watch
from bench.common import Profile, Result, log, percentile
from bench.procs import Web, server_env, spawn, start_web, wait_port
from deploy.localcluster import kube
from plugin.names import GPU_RESOURCE
from tests.workloads_e2e.procs import PrivateRedis, start_worker, stop_process, wait_for

Obj = dict[str, Any]


@dataclass(frozen=True)
class Size:
    nodes: int
    jobs: int
    clients: int


SIZES: dict[Profile, Size] = {"ci": Size(100, 2000, 50), "full": Size(1000, 20000, 50)}
STEPS: dict[Profile, tuple[Size, ...]] = {  # cost against size: nodes and jobs grow, clients stay
    "ci": (Size(10, 200, 50), Size(30, 600, 50), Size(100, 2000, 50)),
    "full": (Size(100, 2000, 50), Size(300, 6000, 50), Size(1000, 20000, 50)),
}
IMAGE = "registry.example.com/team/train:1.0"  # the tests' image (workloads/tests/conftest.py)
CPU_M, MEMORY_MI = 100, 64  # per job; both sides' pods ask the same (the portal: requests = limits)
HOLD_S = 1800  # a simulated run longer than any wave: each job holds its GPU until the wave is cleared
WORKER_CONCURRENCY = 4  # the chart's worker.concurrency
# The worker's queues (`start_worker` in tests/workloads_e2e/procs.py).
QUEUES = ("celery", "reconcile", "notify")
DIRECT_NS = "b4-direct"


class Side(Protocol):
    def submit(self, client: int, index: int) -> str:
        """Create job number `index` as `client`; return its watch key once answered."""

    def end(self, client: int, keys: list[str]) -> None:
        """End the jobs `client` made (untimed): their pods go away and free their GPUs."""

    def settle(self) -> None:
        """Once the wave's pods are gone: wait until the side has no work of the wave left."""


def direct_pod(name: str) -> Obj:
    pod = bare_pod(name)
    pod["metadata"]["labels"] = {"bench": "b4"}  # not bare_pod's managed-by: the portal's label
    resources = {"cpu": f"{CPU_M}m", "memory": f"{MEMORY_MI}Mi", GPU_RESOURCE: "1"}
    pod["spec"]["containers"][0]["resources"] = {"requests": resources, "limits": dict(resources)}
    return pod


class Direct:
    """The reference: pods POSTed to the API server through one official client shared by the client
    threads (a keep-alive connection each from its pool), the responses read as bytes, never decoded."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        kube.create_namespace(api, DIRECT_NS)

    def submit(self, client: int, index: int) -> str:
        name = f"b4-pod-{index}"
        if not kube.create(self.api, f"/api/v1/namespaces/{DIRECT_NS}/pods", direct_pod(name)):
            raise RuntimeError(f"pod {name} already exists")  # kube.create passes over a 409
        return f"{DIRECT_NS}/{name}"

    def end(self, client: int, keys: list[str]) -> None:
        for key in keys:
            kube.delete(self.api, f"/api/v1/namespaces/{key.replace('/', '/pods/', 1)}")

    def settle(self) -> None:
        """Nothing: a deleted pod that is gone leaves no work behind in the API server."""


class HttpError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Portal:
    """Ours: each client a project member with its own token, on its own keep-alive connection."""

    def __init__(self, web: Web, redis_port: int, secrets: list[str], project: str) -> None:
        self.redis_port = redis_port
        self.conns = [
            http.client.HTTPConnection("127.0.0.1", web.port_for(i), timeout=120) for i in range(len(secrets))
        ]
        self.headers = [{"Authorization": f"Bearer {s}", "Content-Type": "application/json"} for s in secrets]
        self.body = orjson.dumps(
            {
                "project": project,
                "image": IMAGE,
                "gpus": 1,
                "cpu_millicores": CPU_M,
                "memory_mib": MEMORY_MI,
                "simulate": {"run_seconds": HOLD_S},
            }
        )

    def _post(self, client: int, path: str, body: bytes) -> Obj:
        try:
            status, data = self._send(client, path, body)
        except (ConnectionError, http.client.HTTPException):
            # uvicorn closes a connection idle for 5 s (between waves): once more on a fresh one.
            self.conns[client].close()
            status, data = self._send(client, path, body)
        if status not in (200, 201):
            raise HttpError(status, f"POST {path}: HTTP {status} {data[:300]!r}")
        answer: Obj = orjson.loads(data)
        return answer

    def _send(self, client: int, path: str, body: bytes) -> tuple[int, bytes]:
        conn = self.conns[client]
        conn.request("POST", path, body=body, headers=self.headers[client])
        resp = conn.getresponse()
        return resp.status, resp.read()

    def submit(self, client: int, index: int) -> str:
        return str(self._post(client, "/api/v1/jobs/", self.body)["id"])

    def end(self, client: int, keys: list[str]) -> None:
        for key in keys:
            self._cancel(client, key)

    def _cancel(self, client: int, key: str, tries: int = 20) -> None:
        """A cancel that meets the job's own move (admitted -> running) is refused with "reload and
        retry": retry it, as a client script would."""
        for attempt in range(tries):
            try:
                self._post(client, f"/api/v1/jobs/{key}/cancel/", b"")
                return
            except HttpError as exc:
                if exc.status != 400 or "changed state meanwhile" not in str(exc) or attempt == tries - 1:
                    raise
                time.sleep(0.5)

    def settle(self) -> None:
        """Wait for empty Celery queues: reconciles of the cancellations (one per watch event) go on
        after the pods are gone, and that untimed clearing must not run inside the next wave."""
        broker, start = redis.Redis(port=self.redis_port), time.monotonic()

        def idle() -> bool:
            return not broker.hlen("unacked") and not any(broker.llen(q) for q in QUEUES)

        wait_for(idle, 3600, "the portal's task queues empty", every=1)
        log(f"B4 portal: task queues empty {time.monotonic() - start:.0f} s after the wave's pods were gone")


@dataclass
class Outcome:
    answered: dict[str, float] = field(default_factory=dict)  # key -> when its 201 came (time.time)
    latencies: list[float] = field(default_factory=list)  # seconds, 201 -> pod Running
    span: float = 0.0  # the waves' first POST -> last Running, summed
    excess: int = 0  # GPUs over a node's capacity at the worst instant

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.span if self.span else 0.0


@dataclass
class Spent:
    """What the machine did in the timed parts of the waves (first POST -> all Running): CPU seconds
    per kind of process, and requests to the kube-apiserver by verb and resource."""

    api: ApiClient
    cpu: dict[str, float] = field(default_factory=dict)
    calls: apicalls.Calls = field(default_factory=Counter)

    @contextmanager
    def timed(self) -> Iterator[None]:
        cpu, calls = cpu_use.snapshot(), apicalls.snapshot(self.api)
        yield
        cpu_use.spent(cpu, cpu_use.snapshot(), self.cpu)
        self.calls += apicalls.snapshot(self.api) - calls


def _wave(
    side: Side, watch: PodWatch, pool: ThreadPoolExecutor, clients: int, indices: range, spent: Spent
) -> tuple[dict[str, float], float]:
    """Submit `indices` over the clients (each back to back), wait until all run, end them, wait
    until their pods are gone; returns the 201 times by key and when the first POST went out."""
    answered: dict[str, float] = {}
    made: list[list[str]] = [[] for _ in range(clients)]

    def client(c: int) -> None:
        for index in indices[c::clients]:
            key = side.submit(c, index)
            answered[key] = time.time()
            made[c].append(key)

    timeout = 600 + len(indices)
    with spent.timed():
        start = time.time()
        list(pool.map(client, range(clients)))
        wait_for(lambda: watch.all_running(answered), timeout, f"{len(indices)} pods Running", every=0.1)
    list(pool.map(lambda c: side.end(c, made[c]), range(clients)))
    wait_for(lambda: not watch.any_alive(set(answered)), timeout, "the wave's pods gone", every=0.2)
    side.settle()
    return answered, start


def drive(side: Side, watch: PodWatch, size: Size, gpus: int, name: str, api: ApiClient) -> Outcome:
    """A warm-up wave, then waves of at most `gpus` jobs until `size.jobs` have run."""
    out, done, spent = Outcome(), 0, Spent(api)
    watch.excess = 0
    with ThreadPoolExecutor(size.clients, thread_name_prefix=f"b4-{name}") as pool:
        _wave(side, watch, pool, size.clients, range(min(size.clients, gpus)), Spent(api))
        while done < size.jobs:
            count = min(gpus, size.jobs - done)
            first = size.clients + done
            answered, start = _wave(side, watch, pool, size.clients, range(first, first + count), spent)
            span = max(watch.running[k] for k in answered) - start
            latencies = [watch.running[k] - at for k, at in answered.items()]
            p99 = _ms(latencies, 99)
            log(f"B4 {name}: {count} jobs Running {span:.1f} s after the first POST, p99 {p99:.0f} ms")
            out.answered.update(answered)
            out.latencies += latencies
            out.span += span
            done += count
    out.excess = watch.excess
    # What bounds the rate, side by side: where the CPU went, and what each job asked of the API server.
    log(f"B4 {name}: CPU while the waves ran: {cpu_use.describe(spent.cpu, out.span)}")
    log(f"B4 {name}: kube-apiserver, {apicalls.per_job(Counter(), spent.calls, done)}")
    return out


def _seed(size: Size, gpus: int) -> tuple[str, list[str]]:
    """One project whose quota holds the whole cluster, the clients its members with a read+submit
    token each, the test image allowed, queue caps above a wave. Bulk-created: a saved Project or
    Quota would publish a namespace task through this process's broker, which is not the stack's."""
    from accounts.choices import Role, TokenScope
    from accounts.models import Membership, Project, Quota
    from accounts.services import token_create
    from bench.b9_seed import _users
    from workloads.models import ImageRule, QueueSettings

    people = _users(size.clients)
    [project] = Project.objects.bulk_create([Project(slug="b4", name="B4 submit")])
    # CPU and memory with room to spare: the GPUs are the quota under test.
    Quota.objects.bulk_create(
        [
            Quota(
                project=project,
                gpus=gpus,
                cpu_millicores=2 * gpus * CPU_M,
                memory_mib=2 * gpus * MEMORY_MI,
                max_concurrent_jobs=gpus,
            )
        ]
    )
    Membership.objects.bulk_create(Membership(project=project, user=u, role=Role.MEMBER) for u in people)
    ImageRule.objects.bulk_create(
        [ImageRule(project=project, registry="registry.example.com", repository="team/train")]
    )
    QueueSettings.objects.update_or_create(
        pk=1,
        defaults={"max_queued_per_user": gpus, "max_queued_per_project": gpus, "idle_reclaim_enabled": False},
    )
    scopes: list[str] = [TokenScope.READ, TokenScope.SUBMIT]
    return project.slug, [token_create(user=u, name="b4", scopes=scopes, expires_at=None)[1] for u in people]


@contextmanager
def portal_stack(db_url: str, kubeconfig: Path) -> Iterator[tuple[Web, int]]:
    """The chart's processes on this machine, production settings, a Redis of their own (this
    machine's shared one may carry other runs' Celery queues); yields the web tier and the Redis port."""
    workdir = Path(tempfile.mkdtemp(prefix="b4-stack-"))
    broker = PrivateRedis(workdir)
    broker.start()
    # Mail goes nowhere: production's SMTP default has no server here, and each job's notice would
    # fail and retry for minutes (autoretry), work a real site with a mail server does not do.
    env = {
        **server_env(db_url),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "REDIS_URL": broker.url,
        "GPUPORTAL_KUBECONFIG": str(kubeconfig),
        "GPUPORTAL_JOB_SIMULATION": "1",
        "PYTHONUNBUFFERED": "1",
        "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
    }
    celery = str(Path(sys.executable).parent / "celery")
    beat = [celery, "-A", "portal", "beat", "-s", str(workdir / "beat.db"), "-l", "warning"]
    web = start_web(env)
    procs = [
        *web.procs,
        start_worker(env, workdir / "worker.log", "b4", concurrency=WORKER_CONCURRENCY),
        spawn(beat, env, workdir / "beat.log"),
        spawn([sys.executable, "manage.py", "controller"], env, workdir / "controller.log"),
    ]
    log(f"B4: portal stack on ports {web.ports}, logs in {workdir}")
    try:
        for port in web.ports:
            wait_port(port)
        yield web, broker.port
    finally:
        for proc in procs:
            stop_process(proc)
        broker.stop()


def _portal_stages(answered: dict[str, float]) -> dict[str, list[float]]:
    """Seconds from the 201 to each step the portal records: its Kubernetes Job made (suspended), the
    job admitted by the queue, the job Running in its own record (what its pages and API show)."""
    from workloads.choices import JobState
    from workloads.models import Job, JobEvent

    made = Job.objects.filter(created_in_cluster_at__isnull=False).values_list("uid", "created_in_cluster_at")
    when: dict[str, dict[str, float]] = {"made": {str(u): at.timestamp() for u, at in made if at}}
    states = JobEvent.objects.filter(to_state__in=[JobState.ADMITTED, JobState.RUNNING])
    for uid, state, at in states.values_list("job__uid", "to_state", "at"):
        when.setdefault(state, {}).setdefault(str(uid), at.timestamp())  # by time: the first one kept
    return {step: [seen[k] - at for k, at in answered.items() if k in seen] for step, seen in when.items()}


def _ms(values: list[float], pct: float) -> float:
    return percentile(values, pct) * 1000


def _results(
    profile: Profile, size: Size, gpus: int, label: str, ours: Outcome, ref: Outcome, state: list[float]
) -> list[Result]:
    backend = (
        f"portal (2 web replicas, Celery worker x{WORKER_CONCURRENCY}, beat, controller; Postgres, "
        f"Redis) on {size.nodes} kwok nodes ({gpus} GPUs, kube-apiserver 1.36), "
        f"{len(ours.latencies)} jobs by {size.clients} API clients; "
        "ref: the same pods POSTed to the kube-apiserver"
    )
    p99, ref99 = _ms(ours.latencies, 99), _ms(ref.latencies, 99)
    log(f"B4: {ours.rate:.1f} vs {ref.rate:.1f} jobs/s, p99 {p99:.0f} vs {ref99:.0f} ms (+{p99 - ref99:.0f})")
    rows = [
        ("throughput_jobs_per_s_vs_direct", ours.rate, ref.rate, ">= 0.9x", ours.rate >= 0.9 * ref.rate),
        ("submit_to_running_p99_ms_vs_direct", p99, ref99, "<= direct + 100 ms", p99 - ref99 <= 100),
        (
            "submit_to_running_p50_ms_vs_direct",
            _ms(ours.latencies, 50),
            _ms(ref.latencies, 50),
            "informational",
            True,
        ),
        ("gpus_over_allocated_max", float(ours.excess), float(ref.excess), "0", ours.excess == 0),
        ("portal_state_running_p99_ms_vs_direct_pod", _ms(state, 99), ref99, "informational", True),
    ]
    return [Result("B4", profile, backend, m, a, b, goal, ok, label) for m, a, b, goal, ok in rows]


def measure(size: Size, profile: Profile = "ci", label: str = "") -> list[Result]:
    """Both sides at one size on one fresh cluster and database; `label` marks a run_sizes step."""
    from bench.b6_ingest import bench_database

    name = os.environ.get("GPUPORTAL_BENCH_CLUSTER", "gpuportal-bench")
    with bench_cluster(name, size.nodes) as handle, bench_database("b4") as db_url, handle.api() as api:
        capacity = capacity_of(api)
        gpus = sum(capacity.values())
        slug, secrets = _seed(size, gpus)
        with pod_watch(handle.kubeconfig, capacity) as watch:
            log(f"B4: direct, {size.jobs} pods on {gpus} GPUs in waves")
            ref = drive(Direct(api), watch, size, gpus, "direct", api)
            log(f"B4: Kubernetes Jobs alone, {size.jobs} suspended Jobs un-suspended at once")
            jobs_side = KubeJobs(api, IMAGE, gpus, CPU_M, MEMORY_MI, HOLD_S)
            jobs = drive(jobs_side, watch, size, gpus, "k8s jobs", api)
            jobs_side.close()
            with portal_stack(db_url, handle.kubeconfig) as (web, redis_port):
                log(f"B4: portal, {size.jobs} jobs on {gpus} GPUs in waves")
                ours = drive(Portal(web, redis_port, secrets, slug), watch, size, gpus, "portal", api)
        stages = _portal_stages(ours.answered)
        kube.delete(api, f"/api/v1/namespaces/{DIRECT_NS}")
    stages["pod running"] = ours.latencies
    log(
        "B4 portal, from the 201 (p50 / p99 ms): "
        + ", ".join(f"{step} {_ms(v, 50):.0f} / {_ms(v, 99):.0f}" for step, v in stages.items())
    )
    rows = _results(profile, size, gpus, label, ours, ref, stages.get("running", []))
    where = f"{size.nodes} kwok nodes ({gpus} GPUs), {size.clients} threads"
    return rows + job_rows(profile, label, where, ours, ref, jobs)


def run(profile: Profile) -> Iterator[Result]:
    yield from measure(SIZES[profile], profile)


def run_sizes(profile: Profile) -> Iterator[Result]:
    for size in STEPS[profile]:  # yielded per step: a crash keeps what was measured
        yield from measure(size, profile, f"nodes={size.nodes}")
