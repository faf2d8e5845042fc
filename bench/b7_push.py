"""B7: live push, sample -> browser age, at N websocket clients.

Each run starts a real ASGI server in a subprocess (daphne or uvicorn) serving portal.asgi with one
Redis channel layer (RedisChannelLayer or RedisPubSubChannelLayer), on a throwaway database. N clients
(websockets, one operator session) watch node pages spread over the nodes; a publisher pushes one
frame per node per second through gpu.broadcast (what ingest does after commit), stamped with the
sample time. Age = client receive time - sample time. The floor is a raw ASGI fan-out with no
Channels, no Redis and no Django (`raw_app` below) on the same server, same clients, same frames.
The clients run in CLIENT_PROCESSES processes of their own, the publisher in this one. Loopback
only; every loop is bounded by the profile's duration.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from bench import cpu as cpu_use
from bench.common import Profile, Result, log, percentile
from bench.procs import chart_web_pool, free_port, wait_port
from gpu.frames import frame
from gpu.messages import GpuFacts, GpuFrame
from plugin.contract import GpuSample

ROOT = Path(__file__).resolve().parent.parent
PROFILES = {"ci": (200, 50, 10.0), "full": (1000, 1000, 15.0)}  # clients, nodes, seconds measured
LAYERS = {
    "redis": "channels_redis.core.RedisChannelLayer",
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}
GPUS_PER_NODE = 4


def _frame(node: str, index: int, ts: str) -> GpuFrame:
    """A frame as ingest builds it, from the agent's sample (no Django: the bare fan-out uses it too)."""
    uuid = f"GPU-b7-{node}-{index}"
    sample = GpuSample(
        gpu_uuid=uuid,
        ts=ts,
        util_gpu=80,
        util_mem=40,
        mem_used_mib=9000,
        mem_total_mib=32768,
        temp_c=70.0,
        power_w=400.0,
        sm_clock_mhz=2407,
        mem_clock_mhz=14001,
        ecc_sbe=0,
        ecc_dbe=0,
        xid=None,
        processes=[],
    )
    facts = GpuFacts(
        uuid=uuid, node=node, index=index, health="healthy", sharing_mode="exclusive", in_service=True
    )
    return frame(sample, facts)


def _now_ts() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- the floor: raw ASGI fan-out, no Channels -------------------------------------------------
_sockets: dict[str, list[Any]] = {}
_ticker: asyncio.Task[None] | None = None


async def _tick() -> None:
    """Each node's frame once a second, node by node spread over the second (as `_publisher`)."""
    due, k = time.monotonic(), 0
    while _sockets:
        nodes = sorted(_sockets)  # sockets still connecting: the step follows the node count
        due = max(due + 1.0 / len(nodes), time.monotonic() - 1.0)
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        node, k = nodes[k % len(nodes)], k + 1
        ts = _now_ts()
        gpus = {f"{node}-{i}": _frame(node, i, ts) for i in range(GPUS_PER_NODE)}
        text = json.dumps({"type": "gpu.samples", "sent_at": time.time(), "gpus": gpus})
        sends = list(_sockets.get(node, []))
        await asyncio.gather(
            *(send({"type": "websocket.send", "text": text}) for send in sends), return_exceptions=True
        )


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ws/nodes/<name>/ -> one frame per node per second to every socket of that node."""
    global _ticker  # one ticker per server process
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "websocket":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    node = scope["path"].strip("/").split("/")[-1]
    _sockets.setdefault(node, []).append(send)
    if _ticker is None or _ticker.done():
        _ticker = asyncio.get_running_loop().create_task(_tick())
    try:
        while (await receive())["type"] != "websocket.disconnect":
            pass
    finally:
        _sockets[node].remove(send)
        if not _sockets[node]:
            del _sockets[node]


# --- servers ------------------------------------------------------------------------------------
def _settings_module(tmp: Path, layer: str, prefix: str) -> str:
    name = f"b7_settings_{layer}"
    (tmp / f"{name}.py").write_text(
        "from portal.settings import *  # noqa\n"
        f"CHANNEL_LAYERS = {{'default': {{'BACKEND': '{LAYERS[layer]}',\n"
        f"                             'CONFIG': {{'hosts': [REDIS_URL], 'prefix': '{prefix}'}}}}}}\n"
    )
    return name


def _start(server: str, app: str, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    bin_dir = Path(sys.executable).parent
    if server == "daphne":
        # daphne drops a socket whose connect() has not accepted within 5 s by default.
        argv = [
            str(bin_dir / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "--websocket_connect_timeout",
            "30",
            app,
        ]
    else:
        argv = [
            str(bin_dir / "uvicorn"),
            app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--ws",
            "websockets",
            "--lifespan",
            "off",
        ]
    log_path = Path(tempfile.gettempdir()) / f"b7-{server}-{port}.log"
    with log_path.open("wb") as out:  # the child keeps its own handle; read on failure
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


# --- clients and publisher ----------------------------------------------------------------------
# The sockets' receiving side is spread over processes: with all 1,000 in one Python loop, that loop's
# own backlog (1,000 JSON messages a second on one core) was counted as push latency, and the raw
# floor alone measured p99 281 ms. Each process holds a quarter of the sockets.
CLIENT_PROCESSES = 4


class Shared(NamedTuple):
    """What the benchmark and its client processes share: sockets set up, the time measuring starts
    (wall clock; before it, frames are warm-up), and the end."""

    ready: Any  # multiprocessing Value("i")
    measure_from: Any  # multiprocessing Value("d")
    stop: Any  # multiprocessing Event


async def _client(url: str, cookie: str, ages: list[float], held: list[float], shared: Shared) -> None:
    """Receives until the end; per frame its age, and how much of it passed before the message
    went to the channel layer (its `sent_at`: the publisher's coalescing and send queue)."""
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    headers = {"Cookie": cookie} if cookie else {}
    # A generous open timeout: under a connect storm the handshake waits for session lookups.
    async with connect(
        url,
        additional_headers=headers,
        origin=Origin("http://127.0.0.1"),
        max_size=None,
        open_timeout=120,
    ) as ws:
        if cookie:
            await asyncio.wait_for(ws.recv(), timeout=120)  # the snapshot: this socket is fully set up
        with shared.ready.get_lock():
            shared.ready.value += 1
        while not shared.stop.is_set():
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            now = time.time()
            message = json.loads(raw)
            if (
                message.get("type") != "gpu.samples"
                or not message.get("sent_at")
                or now < shared.measure_from.value
            ):
                continue  # snapshots are old data by design; the first second is warm-up
            for frame in message["gpus"].values():
                sampled = datetime.fromisoformat(frame["ts"].replace("Z", "+00:00")).timestamp()
                ages.append(now - sampled)
                held.append(message["sent_at"] - sampled)


async def _clients(urls: list[str], cookie: str, shared: Shared) -> tuple[list[float], list[float]]:
    ages: list[float] = []
    held: list[float] = []
    tasks = []
    for url in urls:  # 50 new sockets a second over all processes: a fleet of browsers, not a herd
        tasks.append(asyncio.create_task(_client(url, cookie, ages, held, shared)))
        await asyncio.sleep(0.02 * CLIENT_PROCESSES)
    await asyncio.gather(*tasks, return_exceptions=True)
    return ages, held


def _client_process(urls: list[str], cookie: str, shared: Shared, out: Any) -> None:
    out.put(asyncio.run(_clients(urls, cookie, shared)))


def _publisher(nodes: list[str], stop: threading.Event, seconds: float) -> None:
    """Each node's batch of 4 frames once a second, node i at i/len(nodes) into each second: a real
    cluster's agents each sample on their own clock, started at unrelated times, so ingest sees
    4,000 samples/s as a steady stream, not all 1,000 nodes at one instant (which the first version
    of this loop sent, a burst whose own drain was most of the age: 105 ms p50 before the layer send)."""
    from gpu import broadcast

    start, k = time.monotonic(), 0
    while not stop.is_set():
        due = start + k / len(nodes)
        if due - start >= seconds:
            return
        stop.wait(max(0.0, due - time.monotonic()))
        node, ts = nodes[k % len(nodes)], _now_ts()
        broadcast.samples_published(node=node, frames=[_frame(node, i, ts) for i in range(GPUS_PER_NODE)])
        k += 1


def _measure(
    base: str, cookie: str, nodes: list[str], clients: int, seconds: float, publish: bool
) -> list[float]:
    ctx = multiprocessing.get_context("spawn")
    shared = Shared(ctx.Value("i", 0), ctx.Value("d", float("inf")), ctx.Event())
    out = ctx.Queue()
    urls = [f"{base}/ws/nodes/{nodes[i % len(nodes)]}/" for i in range(clients)]
    procs = [
        ctx.Process(
            target=_client_process, args=(urls[k::CLIENT_PROCESSES], cookie, shared, out), daemon=True
        )
        for k in range(CLIENT_PROCESSES)
    ]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + 120
    while shared.ready.value < clients and time.monotonic() < deadline:
        time.sleep(0.2)
    log(f"B7:   {shared.ready.value}/{clients} clients connected in {CLIENT_PROCESSES} processes")
    pub_stop = threading.Event()
    # The publisher feeds the whole window, as the floor's ticker does (it stopped a second early,
    # which cost ours a tenth of its frames in the ci profile).
    feed = threading.Thread(target=_publisher, args=(nodes, pub_stop, 1.0 + seconds), daemon=True)
    thread = feed if publish else None
    if thread:
        thread.start()
    shared.measure_from.value = time.time() + 1.0
    cpu, started = cpu_use.snapshot(), time.monotonic()
    time.sleep(1.0 + seconds)
    spent: dict[str, float] = {}
    cpu_use.spent(cpu, cpu_use.snapshot(), spent)
    log(f"B7:   CPU while measured: {cpu_use.describe(spent, time.monotonic() - started)}")
    pub_stop.set()
    shared.stop.set()
    ages: list[float] = []
    held: list[float] = []
    for _ in procs:
        try:
            got = out.get(timeout=120)
        except queue.Empty:
            codes = [p.exitcode for p in procs]
            raise RuntimeError(f"a B7 client process sent no result (exit codes {codes})") from None
        ages += got[0]
        held += got[1]
    for proc in procs:
        proc.join(timeout=30)
    if ages:  # where the age went: before the layer send (publisher), after it (layer, server, socket)
        after = [a - h for a, h in zip(ages, held, strict=True)]
        log(f"B7:   age p50/p99 {_ms(ages)}; before the layer send {_ms(held)}; after it {_ms(after)}")
    return ages


def _ms(values: list[float]) -> str:
    return f"{percentile(values, 50) * 1000:.0f}/{percentile(values, 99) * 1000:.0f} ms"


def _run_one(
    server: str,
    layer: str | None,
    env: dict[str, str],
    cookie: str,
    nodes: list[str],
    clients: int,
    seconds: float,
) -> list[float]:
    port = free_port()
    app = "portal.asgi:application" if layer else "bench.b7_push:raw_app"
    proc = _start(server, app, port, env)
    try:
        wait_port(port)
        return _measure(f"ws://127.0.0.1:{port}", cookie, nodes, clients, seconds, publish=bool(layer))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _prepare(nodes: int) -> tuple[list[str], str]:
    """Nodes and GPUs in the bench database, and one operator session cookie."""
    from allauth.mfa.models import Authenticator
    from django.conf import settings
    from django.test import Client

    from accounts.models import User
    from gpu.models import Gpu, Node

    names = [f"b7-node-{n:04d}" for n in range(nodes)]
    for name in names:
        node = Node.objects.create(name=name, gpu_count=GPUS_PER_NODE)
        Gpu.objects.bulk_create(
            Gpu(node=node, index=i, uuid=f"GPU-b7-{name}-{i}") for i in range(GPUS_PER_NODE)
        )
    user = User.objects.create_user(username="b7", email="b7@example.com", is_staff=True)
    # Staff see every node only with a second factor that counts for operators.
    factor = Authenticator.objects.create(
        user=user, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"}
    )
    User.objects.filter(pk=user.pk).update(operator_factor=factor)
    client = Client()
    client.force_login(user)
    return names, f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def _use_layer(layer: str, prefix: str) -> None:
    from channels.layers import channel_layers
    from django.conf import settings

    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": LAYERS[layer], "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": prefix}}
    }
    channel_layers.backends.clear()


def _results(profile: Profile, runs: dict[tuple[str, str], list[float]], clients: int) -> Iterator[Result]:
    for server in ("daphne", "uvicorn"):
        floor = runs[(server, "floor")]
        floor_p99 = percentile(floor, 99) * 1000
        for layer in LAYERS:
            ages = runs[(server, layer)]
            p50, p99 = percentile(ages, 50) * 1000, percentile(ages, 99) * 1000
            backend = f"{server} + {LAYERS[layer].rsplit('.', 1)[-1]}, {clients} clients"
            yield Result(
                "B7",
                profile,
                backend,
                "age_p50_ms_vs_floor",
                p50,
                percentile(floor, 50) * 1000,
                "informational",
                True,
            )
            yield Result(
                "B7", profile, backend, "age_p99_ms_vs_floor", p99, floor_p99, "p99 <= 250 ms", p99 <= 250
            )
            yield Result(
                "B7",
                profile,
                backend,
                "frames_delivered_vs_floor",
                len(ages),
                len(floor),
                ">= 0.8x the raw floor",
                len(ages) >= 0.8 * len(floor),
            )


def run(profile: Profile) -> Iterator[Result]:
    from bench.b6_ingest import bench_database

    clients, nodes, seconds = PROFILES[profile]
    nodes = min(nodes, clients)
    runs: dict[tuple[str, str], list[float]] = {}
    with bench_database("b7") as db_url, tempfile.TemporaryDirectory() as tmp:
        names, cookie = _prepare(nodes)
        base_env = {**os.environ, "DATABASE_URL": db_url, "PYTHONPATH": f"{tmp}:{ROOT}"}
        for server in ("daphne", "uvicorn"):
            log(f"B7: {server} raw ASGI floor")
            runs[(server, "floor")] = _run_one(server, None, base_env, "", names, clients, seconds)
            for layer in LAYERS:
                log(f"B7: {server} + {layer}")
                # A fresh key prefix per run: RedisChannelLayer keeps group members for a day, and
                # an earlier run's dead sockets would fill up and slow this run's sends.
                prefix = f"b7-{uuid.uuid4().hex[:8]}"
                _use_layer(layer, prefix)
                # The web pods' database pool as the chart sets it (the consumers' account re-checks).
                env = {
                    **base_env,
                    "DJANGO_SETTINGS_MODULE": _settings_module(Path(tmp), layer, prefix),
                    "DB_POOL_SIZE": str(chart_web_pool()),
                }
                runs[(server, layer)] = _run_one(server, layer, env, cookie, names, clients, seconds)
    yield from _results(profile, runs, clients)
