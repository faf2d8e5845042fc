"""B2: watch -> database lag under pod churn, vs `kubectl get --watch` arrivals and a 10 s poll.

Pods are created at a steady rate; for each we record when the create call returned. Ours: the
shared Watcher (raw JSON watch) whose handler writes a row to Postgres and commits; the lag is
commit time minus create time. References in the same run: the first line kubectl's watch prints
for the pod, and the first 10-second poll that lists it. Also: events lost, and the relist time
(what a 410 costs) for the namespace.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

import psycopg
from kubernetes.client import ApiClient

from bench.b1_sync import BACKEND, bare_pod, bench_cluster
from bench.common import Profile, Result, log, percentile
from deploy.localcluster import bin_dir, kube

RATES = {"ci": [(20, 30)], "full": [(20, 60), (200, 30), (1000, 10)]}  # pods/s, seconds
POLL_S = 10.0


class DbSink:
    """The portal's side: every ADDED pod becomes a committed row, stamped at commit."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("CREATE TEMP TABLE b2_seen (name text PRIMARY KEY, seen double precision)")
        self.seen: dict[str, float] = {}

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind != "ADDED" or name in self.seen:
            return
        self.conn.execute("INSERT INTO b2_seen VALUES (%s, %s) ON CONFLICT DO NOTHING", (name, time.time()))
        self.seen[name] = time.time()


def kubectl_watch(kubeconfig: str, ns: str, arrivals: dict[str, float]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            str(bin_dir() / "kubectl"),
            "--kubeconfig",
            kubeconfig,
            "get",
            "pods",
            "-n",
            ns,
            "--watch",
            "-o",
            "name",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            arrivals.setdefault(line.strip().removeprefix("pod/"), time.time())

    threading.Thread(target=read, daemon=True).start()
    return proc


def poller(api: ApiClient, ns: str, found: dict[str, float], stop: threading.Event) -> None:
    while not stop.wait(POLL_S):
        now = time.time()
        for item in kube.get(api, f"/api/v1/namespaces/{ns}/pods")["items"]:
            found.setdefault(item["metadata"]["name"], now)


def churn(api: ApiClient, ns: str, rate: int, seconds: int) -> dict[str, float]:
    created: dict[str, float] = {}
    interval, start = 1.0 / rate, time.monotonic()
    for i in range(rate * seconds):
        target = start + i * interval
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        name = f"churn-{i}"
        kube.create(api, f"/api/v1/namespaces/{ns}/pods", bare_pod(name))
        created[name] = time.time()
    return created


def lags(created: dict[str, float], seen: dict[str, float]) -> list[float]:
    return [max(0.0, seen[n] - t) for n, t in created.items() if n in seen]


def one_rate(handle: Any, rate: int, seconds: int, dsn: str) -> dict[str, float]:
    from bench.b1_sync import portal_client
    from workloads.k8s.watch import Watcher, WatchSpec

    ns = f"b2-{rate}-{uuid.uuid4().hex[:6]}"
    with kube.connected(handle.kubeconfig) as api:
        kube.create_namespace(api, ns)
        sink, stop = DbSink(dsn), threading.Event()
        arrivals: dict[str, float] = {}
        polled: dict[str, float] = {}
        watcher = Watcher(
            client=portal_client(handle.kubeconfig),
            spec=WatchSpec("pods", f"/api/v1/namespaces/{ns}/pods", None, sink.on_event),
        )
        threading.Thread(target=watcher.run, args=(stop,), daemon=True).start()
        kubectl = kubectl_watch(str(handle.kubeconfig), ns, arrivals)
        threading.Thread(target=poller, args=(api, ns, polled, stop), daemon=True).start()
        time.sleep(3)
        created = churn(api, ns, rate, seconds)
        time.sleep(POLL_S + 2)
        stop.set()
        kubectl.terminate()
        relist_start = time.perf_counter()
        watcher.relist()
        relist_s = time.perf_counter() - relist_start
        kube.delete(api, f"/api/v1/namespaces/{ns}")
    ours, ref, poll = lags(created, sink.seen), lags(created, arrivals), lags(created, polled)
    log(
        f"rate {rate}/s: ours p50 {percentile(ours, 50):.3f} p99 {percentile(ours, 99):.3f}; kubectl p99 "
        f"{percentile(ref, 99):.3f}; poll p99 {percentile(poll, 99):.3f}; lost {len(created) - len(ours)}"
    )
    return {
        "ours_p99": percentile(ours, 99),
        "kubectl_p99": percentile(ref, 99),
        "poll_p99": percentile(poll, 99),
        "lost": float(len(created) - len(ours)),
        "relist_s": relist_s,
        "created": float(len(created)),
    }


def run(profile: Profile) -> Iterable[Result]:
    dsn = os.environ.get("DATABASE_URL", "")
    if not dsn.startswith("postgres"):
        raise SystemExit("B2 needs DATABASE_URL=postgres://... (the watch writes to Postgres)")
    with bench_cluster(os.environ.get("GPUPORTAL_BENCH_CLUSTER", "gpuportal-bench"), 4) as handle:
        for rate, seconds in RATES[profile]:
            m = one_rate(handle, rate, seconds, dsn)
            goal = 1.5 * m["kubectl_p99"] + 0.05
            yield Result(
                "B2",
                profile,
                BACKEND,
                f"p99_lag_s_at_{rate}_per_s_vs_kubectl",
                m["ours_p99"],
                m["kubectl_p99"],
                "<= 1.5x + 50 ms",
                m["ours_p99"] <= goal,
            )
            yield Result(
                "B2",
                profile,
                BACKEND,
                f"p99_lag_s_at_{rate}_per_s_vs_10s_poll",
                m["ours_p99"],
                m["poll_p99"],
                "<= 0.05x",
                m["ours_p99"] * 20 <= m["poll_p99"],
            )
            yield Result(
                "B2",
                profile,
                BACKEND,
                f"events_lost_at_{rate}_per_s",
                m["lost"],
                m["created"],
                "0",
                m["lost"] == 0,
            )
            yield Result(
                "B2",
                profile,
                BACKEND,
                f"relist_s_after_410_at_{rate}_per_s",
                m["relist_s"],
                2.0,
                "<= 2 s",
                m["relist_s"] <= 2.0,
            )
