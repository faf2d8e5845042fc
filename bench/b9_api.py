"""B9: API responsiveness at scale: single-object GET and page-of-100 list p99 under concurrent clients.

Ours: the portal's REST API as the chart runs it (bench/procs.py: its 2 web replicas, each a uvicorn of
one worker, the clients' connections dealt evenly between them as a Service does; production settings),
over a throwaway Postgres database holding the profile's jobs, nodes and users (bench/b9_seed.py,
bulk-created in the portal's own tables). Clients hold personal tokens, one in ten an operator's; each GETs
/api/v1/jobs/<id>/ and /api/v1/jobs/?page_size=100&page=k in turn, paced at one request per `interval`
per client (people and scripts, not a closed loop, which would only measure the CPU queue of 2 cores).
References in the same run: the real kube-apiserver of the local cluster under the same clients and
pacing (GET a pod; LIST ?limit=100 pods of a namespace), and `kubectl get pod/pods -n <ns>` run one
at a time next to our API called one request at a time. Also: SQL queries of a page of 100 vs 10.
"""

from __future__ import annotations

import http.client
import os
import random
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.client import ApiClient

from bench.b1_sync import bare_pod, bench_cluster
from bench.b9_seed import Seat, seed
from bench.common import Profile, Result, log, percentile
from bench.procs import server_env, start_web, wait_port
from deploy.localcluster import bin_dir, kube

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Size:
    jobs: int
    nodes: int
    users: int
    clients: int
    seconds: float  # under load, per side
    interval: float  # each client sends one request per interval
    kwok: int  # kwok nodes of the reference cluster
    pods: int  # pods there, 100 per namespace


@dataclass
class Side:
    """Latencies in seconds, object GETs under True and pages of 100 under False."""

    seq: dict[bool, list[float]]
    load: dict[bool, list[float]]
    kubectl: dict[str, list[float]] = field(default_factory=dict)


PROFILES = {
    "ci": Size(jobs=2000, nodes=100, users=60, clients=20, seconds=10.0, interval=1.0, kwok=4, pods=200),
    "full": Size(
        jobs=20000, nodes=1000, users=300, clients=50, seconds=30.0, interval=1.0, kwok=20, pods=1000
    ),
}
PODS_PER_NS = 100
SEQUENTIAL = {"ci": 15, "full": 30}  # one-at-a-time calls per kind (ours and kubectl)
Call = Callable[[bool], None]  # makes one request: True for an object GET, False for a page of 100


def portal_call(port: int, seat: Seat) -> Call:
    """A keep-alive HTTP client of one seat (one per thread)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {seat.secret}", "Accept": "application/json"}
    rng = random.Random(seat.secret)

    def call(single: bool) -> None:
        if single:
            path = f"/api/v1/jobs/{rng.choice(seat.uids)}/"
        else:
            path = f"/api/v1/jobs/?page_size=100&page={rng.randint(1, seat.pages)}"
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: HTTP {resp.status}")

    return call


def kube_call(api: ApiClient, namespaces: list[str], seed_: int) -> Call:
    """The reference client: the body read as bytes, never decoded, as our side's client reads it. The
    threads share one official client and each request takes a keep-alive connection from its pool."""
    rng = random.Random(seed_)

    def call(single: bool) -> None:
        ns = rng.choice(namespaces)
        if single:
            kube.call(api, "GET", f"/api/v1/namespaces/{ns}/pods/{ns}-pod-{rng.randrange(PODS_PER_NS)}")
        else:
            kube.call(api, "GET", f"/api/v1/namespaces/{ns}/pods", query={"limit": "100"})

    return call


def load(calls: list[Call], seconds: float, interval: float) -> dict[bool, list[float]]:
    """Every call in its own thread, alternating object and list, one request per `interval`."""
    out: dict[bool, list[float]] = {True: [], False: []}
    lock, deadline = threading.Lock(), time.monotonic() + seconds

    def client(index: int, call: Call) -> None:
        time.sleep(interval * index / len(calls))  # spread the clients' phases over one interval
        single = index % 2 == 0
        while (start := time.monotonic()) < deadline:
            call(single)
            took = time.monotonic() - start
            with lock:
                out[single].append(took)
            single = not single
            time.sleep(max(0.0, interval - took))

    threads = [threading.Thread(target=client, args=(i, c), daemon=True) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def sequential(call: Call, runs: int) -> dict[bool, list[float]]:
    out: dict[bool, list[float]] = {True: [], False: []}
    for single in (True, False):
        call(single)  # warm the connection and the caches
        for _ in range(runs):
            start = time.monotonic()
            call(single)
            out[single].append(time.monotonic() - start)
    return out


def kubectl_times(kubeconfig: Path, ns: str, runs: int) -> dict[str, list[float]]:
    base = [str(bin_dir() / "kubectl"), "--kubeconfig", str(kubeconfig), "-n", ns, "get"]
    argvs = {
        "pod": [*base, "pod", f"{ns}-pod-0", "-o", "json"],
        "pods": [*base, "pods"],
        "pods_json": [*base, "pods", "-o", "json"],
    }
    out: dict[str, list[float]] = {}
    for key, argv in argvs.items():
        out[key] = []
        for _ in range(runs):
            start = time.monotonic()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            out[key].append(time.monotonic() - start)
    return out


def query_counts(seat: Seat) -> tuple[int, int]:
    """SQL queries of a page of 100 and of a page of 10 for the same user, in this process."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_AUTHORIZATION=f"Bearer {seat.secret}")
    counts = []
    for size in (100, 10):
        client.get(f"/api/v1/jobs/?page_size={size}")
        with CaptureQueriesContext(connection) as ctx:
            client.get(f"/api/v1/jobs/?page_size={size}", HTTP_HOST="127.0.0.1")
        counts.append(len(ctx.captured_queries))
    return counts[0], counts[1]


def create_pods(api: ApiClient, count: int) -> list[str]:
    from concurrent.futures import ThreadPoolExecutor

    namespaces = [f"b9-team-{i}" for i in range(max(1, count // PODS_PER_NS))]
    for ns in namespaces:
        kube.create_namespace(api, ns)
    names = [(ns, f"{ns}-pod-{i}") for ns in namespaces for i in range(PODS_PER_NS)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda p: kube.create(api, f"/api/v1/namespaces/{p[0]}/pods", bare_pod(p[1])), names))
    return namespaces


def ms(values: list[float], pct: float) -> float:
    return percentile(values, pct) * 1000


def _measure_portal(db_url: str, seats: list[Seat], size: Size, runs: int) -> Side:
    web = start_web(server_env(db_url))
    try:
        for port in web.ports:
            wait_port(port)
            sequential(portal_call(port, seats[1]), 3)  # every replica warm (imports, first connection)
        seq = sequential(portal_call(web.ports[0], seats[1]), runs)
        log(f"B9: ours, {len(seats)} clients for {size.seconds:.0f} s")
        calls = [portal_call(web.port_for(i), s) for i, s in enumerate(seats)]
        return Side(seq, load(calls, size.seconds, size.interval))
    finally:
        web.stop()


def _measure_kube(size: Size, runs: int) -> Side:
    name = os.environ.get("GPUPORTAL_BENCH_CLUSTER", "gpuportal-bench")
    with bench_cluster(name, size.kwok) as handle, handle.api() as api:
        t0 = time.monotonic()
        namespaces = create_pods(api, size.pods)
        log(f"B9: {size.pods} pods in {len(namespaces)} namespaces in {time.monotonic() - t0:.1f} s")
        kubectl = kubectl_times(handle.kubeconfig, namespaces[0], runs)
        seq = sequential(kube_call(api, namespaces, 1), runs)
        log(f"B9: kube-apiserver, {size.clients} clients for {size.seconds:.0f} s")
        calls = [kube_call(api, namespaces, i) for i in range(size.clients)]
        under = load(calls, size.seconds, size.interval)
        for ns in namespaces:
            kube.delete(api, f"/api/v1/namespaces/{ns}")
    return Side(seq, under, kubectl)


def _results(
    profile: Profile, size: Size, ours: Side, kube: Side, queries: tuple[int, int]
) -> Iterator[Result]:
    clients = f"{size.clients} clients, 1 request / {size.interval:g} s each"
    scale = f"{size.jobs} jobs, {size.nodes} nodes, {size.users} users"
    ref = f"ref kube-apiserver 1.36 ({size.pods} pods)"
    load_be = f"2 web replicas (uvicorn) + Postgres, {scale}; {ref}, {clients}"
    seq_be = f"one request at a time, {scale}; ref kubectl (100 pods in the namespace)"
    one, page = ms(ours.load[True], 99), ms(ours.load[False], 99)
    seq_one, seq_page = ms(ours.seq[True], 99), ms(ours.seq[False], 99)
    rates = [(len(side.load[True]) + len(side.load[False])) / size.seconds for side in (ours, kube)]
    rows = [
        (
            load_be,
            "object_get_p99_ms_vs_apiserver",
            one,
            ms(kube.load[True], 99),
            "p99 <= 100 ms",
            one <= 100,
        ),
        (
            load_be,
            "page100_p99_ms_vs_apiserver",
            page,
            ms(kube.load[False], 99),
            "p99 <= 300 ms",
            page <= 300,
        ),
        (
            load_be,
            "object_get_p50_ms_vs_apiserver",
            ms(ours.load[True], 50),
            ms(kube.load[True], 50),
            "informational",
            True,
        ),
        (
            load_be,
            "page100_p50_ms_vs_apiserver",
            ms(ours.load[False], 50),
            ms(kube.load[False], 50),
            "informational",
            True,
        ),
        (
            load_be,
            "requests_per_s_vs_apiserver",
            rates[0],
            rates[1],
            f"informational (offered {size.clients / size.interval:.0f}/s)",
            True,
        ),
        (
            seq_be,
            "object_get_p99_ms_vs_kubectl_get_pod_json",
            seq_one,
            ms(kube.kubectl["pod"], 99),
            "p99 <= 100 ms",
            seq_one <= 100,
        ),
        (
            seq_be,
            "page100_p99_ms_vs_kubectl_get_pods",
            seq_page,
            ms(kube.kubectl["pods"], 99),
            "p99 <= 300 ms",
            seq_page <= 300,
        ),
        (
            seq_be,
            "page100_p99_ms_vs_kubectl_get_pods_json",
            seq_page,
            ms(kube.kubectl["pods_json"], 99),
            "informational",
            True,
        ),
        (
            f"in-process Django test client, {scale}",
            "sql_queries_page100_vs_page10",
            float(queries[0]),
            float(queries[1]),
            "equal (constant per request)",
            queries[0] == queries[1],
        ),
    ]
    for backend, metric, value, reference, goal, passed in rows:
        yield Result("B9", profile, backend, metric, value, reference, goal, passed)


def run(profile: Profile) -> Iterator[Result]:
    from bench.b6_ingest import bench_database

    size, runs = PROFILES[profile], SEQUENTIAL[profile]
    with bench_database("b9") as db_url:
        t0 = time.monotonic()
        seats = seed(jobs=size.jobs, nodes=size.nodes, users=size.users, clients=size.clients)
        log(f"B9: seeded in {time.monotonic() - t0:.1f} s")
        queries = query_counts(seats[1])
        ours = _measure_portal(db_url, seats, size, runs)
    kube = _measure_kube(size, runs)
    yield from _results(profile, size, ours, kube, queries)
