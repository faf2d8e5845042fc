"""A user's live streams end when their access changes.

Every websocket of a user also joins that user's group; deactivation, a membership removed or
changed, and logout send `session.revoked` there (after commit), and each consumer closes itself.
The browser reconnects and is authorised again with what the user may see now. The consumers also
re-read the user's access on their own (`current_access`: the account, the session the socket came
with, memberships and roles) and close when it differs from what they connected with, so a lost
message, or a change that sends none (a queryset update, a session row deleted), cannot keep a
stream open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import SESSION_KEY

from accounts.models import Membership, User

log = logging.getLogger(__name__)
RECHECK_S = 30.0  # a consumer re-reads the account at least this often while it sends anything
READ_TIMEOUT_S = 10.0  # a re-read without an answer by then counts as a failed one


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def streams_close(user_id: int) -> None:
    """Close every live stream of the user (on all web processes). Never fails the caller."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(user_group(user_id), {"type": "session.revoked"})
    except Exception:  # the periodic re-check still closes them
        log.warning("could not close the live streams of user %s", user_id, exc_info=True)


@dataclass(frozen=True)
class Access:
    """What a user's stream may show: staff or not, and (project id, role) of each membership."""

    staff: bool
    memberships: frozenset[tuple[int, str]]


def current_access(user_id: int, session_key: str | None) -> Access | None:
    """The user's access now, through this session; None when there is none (the account inactive,
    the session signed out, expired or deleted, or now another user's)."""
    user = User.objects.filter(pk=user_id, is_active=True).values("is_staff").first()
    if user is None:
        return None
    if session_key is not None:
        # load() reads the session as a request would: {} when it is gone or expired.
        session = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
        if session.get(SESSION_KEY) != str(user_id):
            return None
    rows = Membership.objects.filter(user_id=user_id).values_list("project_id", "role")
    return Access(staff=bool(user["is_staff"]), memberships=frozenset(rows))


class Recheck:
    """A live consumer's own re-read of its user's access, at most every RECHECK_S, so that a lost
    revocation message cannot keep a stream open: any difference from the access it connected with
    closes the stream.

    The re-read runs beside the stream: the message at hand is sent, not held until the read
    returns (measured at 1,000 sockets, frames held for their socket's re-read set the live
    push's p99, about 350 ms). When the read finds the account inactive, `on_gone` closes the stream at once;
    until then at most a message or two more go out, well inside the RECHECK_S a lost message
    may already take. A read that fails or takes longer than READ_TIMEOUT_S closes the stream too: the
    page reconnects, and connecting authorises again.
    """

    def __init__(
        self, user_id: int, session_key: str | None, connected: Access, on_gone: Callable[[], Awaitable[None]]
    ) -> None:
        self.user_id, self.session_key = user_id, session_key
        self.connected, self.on_gone = connected, on_gone
        self.checked = time.monotonic()
        self.found_gone = False
        self._reading: asyncio.Task[None] | None = None

    def gone(self) -> bool:
        """True once a re-read found the account inactive; starts a re-read when one is due."""
        due = time.monotonic() - self.checked >= RECHECK_S
        if due and self._reading is None and not self.found_gone:
            self._reading = asyncio.get_running_loop().create_task(self._read())
        return self.found_gone

    def stop(self) -> None:
        """The stream ended: a read in flight is not needed any more."""
        if self._reading is not None:
            self._reading.cancel()

    async def _read(self) -> None:
        try:
            # Off the event loop and not thread-sensitive, as the consumers' other reads.
            read = database_sync_to_async(current_access, thread_sensitive=False)(
                self.user_id, self.session_key
            )
            active = await asyncio.wait_for(read, READ_TIMEOUT_S) == self.connected
        except Exception:  # no answer: fail closed rather than stream on unchecked
            log.warning("could not re-read the account of user %s; closing", self.user_id, exc_info=True)
            active = False
        self.checked = time.monotonic()
        if not active:
            self.found_gone = True
            try:
                await self.on_gone()
            except Exception:  # the socket went away meanwhile
                log.debug("closing the stream of user %s", self.user_id, exc_info=True)
        self._reading = None


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """The base of the portal's websocket consumers: async, the ORM reached only through
    database_sync_to_async (which closes spent connections in its own thread around each call).

    Channels also hops to a worker thread before every message to close spent connections
    (`AsyncConsumer.dispatch` awaits `aclose_old_connections`), for consumers that use the ORM some
    other way. Ours do not, and at 1,000 sockets that hop, one per frame per socket, took a third of
    the web process's event loop (py-spy), so dispatch here calls the handler directly.
    """

    close_code: ClassVar[int] = 4403  # the code a socket closes with when its user lost access

    async def close_unauthorised(self) -> None:
        await self.close(code=self.close_code)

    async def start_recheck(self, user: User) -> Recheck | None:
        """The re-check of this socket's access, from the access it connects with (None: it has
        none, refuse the socket)."""
        session = self.scope.get("session")
        session_key = getattr(session, "session_key", None)
        connected = await database_sync_to_async(current_access, thread_sensitive=False)(user.pk, session_key)
        if connected is None:
            return None
        return Recheck(user.pk, session_key, connected, on_gone=self.close_unauthorised)

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)
