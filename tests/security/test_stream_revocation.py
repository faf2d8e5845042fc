"""Live streams end when access changes: deactivation, membership removal or change, logout.

Real Redis channel layer, the full ASGI stack (origin check, session auth) and the real signals:
the account change commits, the revocation goes out, and the socket of the user closes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
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
