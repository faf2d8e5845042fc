"""A user's live streams end when their access changes.

Every websocket of a user also joins that user's group; deactivation, a membership removed or
changed, and logout send `session.revoked` there (after commit), and each consumer closes itself.
The browser reconnects and is authorised again with what the user may see now. The consumers also
re-check the account on their own (see `still_active`), so a lost message cannot keep a stream open.
"""

from __future__ import annotations

import logging
import time

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from accounts.models import User

log = logging.getLogger(__name__)
RECHECK_S = 30.0  # a consumer re-reads the account at least this often while it sends anything


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


def still_active(user_id: int) -> bool:
    return User.objects.filter(pk=user_id, is_active=True).exists()


class Recheck:
    """A live consumer's own re-read of its user's account, at most every RECHECK_S, so that a lost
    revocation message cannot keep a stream open."""

    def __init__(self, user_id: int) -> None:
        self.user_id = user_id
        self.checked = time.monotonic()

    async def gone(self) -> bool:
        """True when a re-read is due and finds the account no longer active."""
        if time.monotonic() - self.checked < RECHECK_S:
            return False
        self.checked = time.monotonic()
        # Off the event loop and not thread-sensitive, as the consumers' other reads.
        active = await database_sync_to_async(still_active, thread_sensitive=False)(self.user_id)
        return not active
