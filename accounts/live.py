"""A user's live streams end when their access changes.

Every websocket of a user also joins that user's group; deactivation, a membership removed or
changed, and logout send `session.revoked` there (after commit), and each consumer closes itself.
The browser reconnects and is authorised again with what the user may see now. The consumers also
re-check the account on their own (see `still_active`), so a lost message cannot keep a stream open.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
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
