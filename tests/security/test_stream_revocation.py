"""Live streams end when access changes: deactivation, membership removal or change, logout.

Real Redis channel layer, the full ASGI stack (origin check, session auth) and the real signals:
the account change commits, the revocation goes out, and the socket of the user closes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.sessions.models import Session
from django.test import Client

from accounts.models import Membership, User
from gpu.tests.ws import connect
from tests.fixtures.personas import World

pytestmark = pytest.mark.django_db(transaction=True)


def _deactivate(user: User) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


def _remove(user: User) -> None:
    Membership.objects.filter(user=user).delete()


def _demote(user: User) -> None:
    Membership.objects.filter(user=user).update(role="viewer")  # queryset update sends no signal
    for membership in Membership.objects.filter(user=user):
        membership.save(update_fields=["role"])


def _log_out(user: User) -> None:
    client = Client()
    client.force_login(user)
    client.post("/accounts/logout/")


CHANGES: dict[str, Callable[[User], None]] = {
    "deactivated": _deactivate,
    "removed": _remove,
    "demoted": _demote,
    "logged out": _log_out,
}


@pytest.mark.parametrize("path", ["/ws/jobs/", "/ws/cluster/"])
@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_a_change_of_access_closes_the_users_sockets(world: World, path: str, change: str) -> None:
    communicator, connected = await connect(path, world.member)
    assert connected
    bystander, also = await connect(path, world.owner)
    assert also
    await sync_to_async(CHANGES[change])(world.member)
    assert await _closes(communicator)
    assert not await _closes(bystander, timeout=1)  # someone else's stream stays open (the wait ends it)


async def _closes(communicator: Any, timeout: float = 10) -> bool:
    """Whether the server closes this socket within `timeout` (frames sent before are skipped)."""
    try:
        while True:
            output: dict[str, Any] = await communicator.receive_output(timeout=timeout)
            if output["type"] == "websocket.close":
                return True
    except TimeoutError:
        return False


def _traffic_for(path: str, world: World) -> Callable[[], None]:
    """Something the socket at `path` forwards to the member: a job change, or a GPU frame."""
    from gpu import broadcast
    from gpu.models import Gpu, Node
    from workloads.services import jobs as job_services
    from workloads.services.broadcast import job_changed
    from workloads.tests.conftest import IMAGE, allow_images

    if path == "/ws/jobs/":
        allow_images(world.alpha)
        job = job_services.job_submit(actor=world.owner, project=world.alpha, data={"image": IMAGE})
        return lambda: job_changed(job.pk)
    node = Node.objects.create(name="revocation-node", gpu_count=1)
    gpu = Gpu.objects.create(node=node, index=0, uuid="GPU-revocation-0", memory_mib=1024)
    frame: Any = {
        "uuid": gpu.uuid,
        "node": node.name,
        "index": 0,
        "ts": "2026-01-01T00:00:00.000Z",
        "util_gpu": 1,
        "util_mem": 1,
        "mem_used_mib": 1,
        "mem_total_mib": 1024,
        "temp_c": 40.0,
        "power_w": 50.0,
        "sm_clock_mhz": 1,
        "mem_clock_mhz": 1,
        "xid": None,
        "health": "healthy",
        "sharing_mode": "exclusive",
        "in_service": True,
        "processes": [],
    }
    return lambda: broadcast.samples_published(node=node.name, frames=[frame])


def _sessions_deleted(user: User) -> None:
    Session.objects.all().delete()  # an operator clearing sessions (clearsessions, the database)


# Changes that send no signal, so no close message: only the consumers' own re-check sees them.
QUIET_CHANGES: dict[str, Callable[[User], Any]] = {
    "deactivated": lambda user: User.objects.filter(pk=user.pk).update(is_active=False),
    "removed": lambda user: Membership.objects.filter(user=user)._raw_delete(Membership.objects.db),
    "demoted": lambda user: Membership.objects.filter(user=user).update(role="viewer"),
    "session deleted": _sessions_deleted,
}


@pytest.mark.parametrize("path", ["/ws/jobs/", "/ws/cluster/"])
@pytest.mark.parametrize("change", sorted(QUIET_CHANGES))
async def test_a_lost_revocation_message_still_ends_the_stream(
    world: World, path: str, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No signal, so no close message: the consumer's own re-check of the user's access, due every
    RECHECK_S (30 s; 0 here) while it sends, closes the socket at the next frame."""
    import accounts.live

    traffic = await sync_to_async(_traffic_for)(path, world)
    communicator, connected = await connect(path, world.member)
    assert connected
    while not await communicator.receive_nothing(timeout=1.0):  # the snapshot, sent before the change
        await communicator.receive_output()
    monkeypatch.setattr(accounts.live, "RECHECK_S", 0.0)
    await sync_to_async(QUIET_CHANGES[change])(world.member)
    assert await communicator.receive_nothing(timeout=1.0), "closed without a frame: not the re-check path"
    await sync_to_async(traffic)()
    assert await _closes(communicator)


@pytest.mark.parametrize("path", ["/ws/jobs/", "/ws/cluster/"])
async def test_the_re_check_does_not_hold_the_frame_and_still_closes(
    world: World, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The due re-read of the account runs beside the stream: while it is still waiting on the
    database, the frame at hand goes out; when it returns "inactive", the socket closes with no
    further traffic."""
    import accounts.live

    traffic = await sync_to_async(_traffic_for)(path, world)
    communicator, connected = await connect(path, world.member)
    assert connected
    while not await communicator.receive_nothing(timeout=1.0):
        await communicator.receive_output()
    reading, answer = threading.Event(), threading.Event()

    def slow_read(user_id: int, session_key: str | None) -> None:
        reading.set()
        answer.wait(30)
        return None

    monkeypatch.setattr(accounts.live, "current_access", slow_read)
    monkeypatch.setattr(accounts.live, "RECHECK_S", 0.0)
    await sync_to_async(traffic)()
    frame = await communicator.receive_output(timeout=10)
    assert frame["type"] == "websocket.send"  # out before the read could answer (it waits for us)
    assert await sync_to_async(reading.wait)(10)  # and the re-read did start
    answer.set()
    assert await _closes(communicator)


async def test_frames_flow_while_the_shared_sync_thread_is_busy(world: World) -> None:
    """Forwarding a frame needs no worker thread: Channels' default dispatch first hops to the
    shared sync thread to close spent connections, so one slow sync call anywhere in the process
    would hold every socket's frames (and at 1,000 sockets the hops take a third of the event loop)."""
    traffic = await sync_to_async(_traffic_for)("/ws/cluster/", world)
    communicator, connected = await connect("/ws/cluster/", world.member)
    assert connected
    while not await communicator.receive_nothing(timeout=1.0):
        await communicator.receive_output()
    release = threading.Event()
    busy = asyncio.ensure_future(sync_to_async(release.wait, thread_sensitive=True)(30))
    try:
        await sync_to_async(traffic, thread_sensitive=False)()
        frame = await communicator.receive_output(timeout=10)
        assert frame["type"] == "websocket.send"
    finally:
        release.set()
        await busy


@pytest.mark.parametrize("path", ["/ws/jobs/", "/ws/cluster/"])
async def test_a_re_check_that_fails_closes_the_stream(
    world: World, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: when the account cannot be re-read (the database away), the stream is not kept
    open unchecked; the page reconnects and connecting authorises again."""
    import accounts.live

    traffic = await sync_to_async(_traffic_for)(path, world)
    communicator, connected = await connect(path, world.member)
    assert connected
    while not await communicator.receive_nothing(timeout=1.0):
        await communicator.receive_output()

    def unreadable(user_id: int, session_key: str | None) -> None:
        raise OSError("the database is away")

    monkeypatch.setattr(accounts.live, "current_access", unreadable)
    monkeypatch.setattr(accounts.live, "RECHECK_S", 0.0)
    await sync_to_async(traffic)()
    assert await _closes(communicator)
