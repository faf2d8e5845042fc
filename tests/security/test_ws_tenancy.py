"""Cross-tenant, websockets: every route of portal.routing, opened through the production ASGI stack (origin
check, session auth) by users of the two other projects. A socket for a victim's object is refused
(WS_REFUSED) or carries nothing of the victim while the victim's job changes and its GPU reports a
process; a route without a probe fails the test, and a foreign Origin is refused on every route."""

from __future__ import annotations

import asyncio
import importlib
import json
import operator
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from accounts.models import User
from gpu import broadcast
from gpu.frames import frame
from gpu.messages import GpuFrame
from plugin.contract import GpuSample, ProcessSample
from portal.routing import websocket_urlpatterns
from tests.fixtures.personas import World
from tests.security.probes import WS_PROBES, WS_REFUSED, Victim
from tests.security.test_tenant_matrix import gamma, victim_of
from workloads.services.broadcast import job_changed

pytestmark = pytest.mark.django_db(transaction=True)

VICTIM_POD = "victim-pod-secret"
PAIRS = [("outsider", "alpha"), ("gamma", "alpha"), ("member", "beta"), ("gamma", "beta")]


def ws_routes() -> set[str]:
    return {str(pattern.pattern) for pattern in websocket_urlpatterns}


def test_every_websocket_route_has_a_probe() -> None:
    missing = ws_routes() - set(WS_PROBES)
    assert not missing, f"websocket routes without a probe in tests/security/probes.py: {sorted(missing)}"
    assert set(WS_PROBES) >= WS_REFUSED


@pytest.fixture(autouse=True)
def production_hosts(settings: Any) -> Iterator[None]:
    """portal.asgi built on a production-shaped host list (the test default "*" lets every Origin in)."""
    import portal.asgi

    original = list(settings.ALLOWED_HOSTS)
    settings.ALLOWED_HOSTS = ["testserver"]
    importlib.reload(portal.asgi)
    yield
    settings.ALLOWED_HOSTS = original
    importlib.reload(portal.asgi)


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def socket(cookie: str, path: str, origin: str = "http://testserver") -> WebsocketCommunicator:
    from portal.asgi import application

    headers = [(b"origin", origin.encode()), (b"host", b"testserver"), (b"cookie", cookie.encode())]
    return WebsocketCommunicator(application, path, headers=headers)


def victim_frame(victim: Victim) -> GpuFrame:
    gpu = victim.extra["gpu"]
    process = ProcessSample(
        pid=7,
        mem_used_mib=1000,
        pod_namespace=victim.project.namespace,
        pod_name=VICTIM_POD,
        container="main",
    )
    sample = GpuSample(
        gpu_uuid=gpu.uuid,
        ts="2026-01-01T00:00:00.000Z",
        util_gpu=90,
        util_mem=50,
        mem_used_mib=1000,
        mem_total_mib=32768,
        temp_c=50.0,
        power_w=200.0,
        sm_clock_mhz=1500,
        mem_clock_mhz=5000,
        ecc_sbe=0,
        ecc_dbe=0,
        xid=None,
        processes=[process],
    )
    return frame(sample, gpu.frame_facts(gpu.node.name))


async def received(communicator: WebsocketCommunicator, seconds: float) -> list[dict[str, Any]]:
    """Everything the socket sends until it has been quiet for `seconds` (receive_nothing does not
    cancel the application, unlike a timed-out receive)."""
    out: list[dict[str, Any]] = []
    while not await communicator.receive_nothing(timeout=seconds):
        out.append(await communicator.receive_json_from())
    return out


def markers(victim: Victim) -> list[str]:
    return [VICTIM_POD, str(victim.extra["job"].uid), victim.manager.email, *victim.extra.get("markers", [])]


@pytest.mark.parametrize(("attacker_name", "slug"), PAIRS)
async def test_foreign_sockets_are_refused_or_silent(world: World, attacker_name: str, slug: str) -> None:
    attacker = await sync_to_async(_attacker)(world, attacker_name)
    victim = await sync_to_async(victim_of)(world, slug)
    cookie = await sync_to_async(session_cookie)(attacker)
    # Every route's socket listens at once, through one change of the victim's job and one GPU
    # frame: the same check as one route after another, in one quiet window instead of one each.
    opened: dict[str, WebsocketCommunicator] = {}
    for route in sorted(ws_routes()):
        path = WS_PROBES[route](victim)
        communicator = socket(cookie, path)
        connected, _ = await communicator.connect(timeout=5)
        if route in WS_REFUSED:
            assert not connected, f"{attacker_name} opened {path} of project {slug}"
            continue
        assert connected, f"{path}: an own-inventory socket should open for {attacker_name}"
        opened[route] = communicator
    before = await asyncio.gather(*(received(c, 0.5) for c in opened.values()))
    await sync_to_async(job_changed)(victim.extra["job"].pk)
    await sync_to_async(broadcast.samples_published)(
        node=victim.extra["gpu"].node.name, frames=[victim_frame(victim)]
    )
    after = await asyncio.gather(*(received(c, 2.5) for c in opened.values()))
    for (route, communicator), messages in zip(opened.items(), map(operator.add, before, after), strict=True):
        await communicator.disconnect()
        text = json.dumps(messages)
        for marker in markers(victim):
            assert marker not in text, f"{route}: {marker} of project {slug} reached {attacker_name}"
        if route.startswith(("ws/cluster/", "ws/nodes/")):
            # The frame did arrive (redacted), so the check above read a real message.
            assert victim.extra["gpu"].uuid in text, f"{route}: the victim's GPU frame never arrived"
    assert opened, "no route opened: the check above read nothing"


@pytest.mark.parametrize("route", sorted(ws_routes()))
async def test_a_foreign_origin_is_refused(world: World, route: str) -> None:
    victim = await sync_to_async(victim_of)(world, "alpha")
    cookie = await sync_to_async(session_cookie)(world.owner)
    own = WS_PROBES[route](victim)
    assert (await socket(cookie, own).connect(timeout=5))[0] or route in WS_REFUSED
    communicator = socket(cookie, own, origin="https://evil.example")
    connected, _ = await communicator.connect(timeout=5)
    assert not connected, f"{route} accepted a socket from a foreign Origin"


def _attacker(world: World, name: str) -> User:
    if name == "gamma":
        return gamma(world)[1]
    user: User = getattr(world, name)
    return user
