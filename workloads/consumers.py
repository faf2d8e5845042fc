"""Live job states for the jobs list and job pages (one consumer per stream).

Authorises in connect(): anonymous sockets are closed; a user joins one group per project they
can see, so a message about another tenant's job never reaches them. A page names the jobs it shows
(`?jobs=`): their current state comes first, then every change.

Async, with the ORM reached off the event loop and not thread-sensitive: a sync consumer runs every
socket's handlers on one shared thread, so under load (200 users, measured) connects would queue behind
each other's queries and time out.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from accounts.live import LiveConsumer, user_group
from accounts.models import User
from accounts.selectors import project_list
from workloads.messages import JobStateMessage, job_group
from workloads.selectors import job_state_snapshot

# A page names at most this many jobs for the socket's first snapshot (the jobs list's page size is less).
SNAPSHOT_MAX = 200


def _watched(query_string: bytes) -> list[str]:
    """The job uids a page asks the current state of (`?jobs=<uid>,<uid>`); malformed ones dropped."""
    values = parse_qs(query_string.decode("latin-1")).get("jobs", [])
    out: list[str] = []
    for raw in ",".join(values).split(",")[:SNAPSHOT_MAX]:
        try:
            out.append(str(uuid.UUID(raw)))
        except ValueError:
            continue
    return out


def _groups(user: User) -> list[str]:
    projects = project_list(user=user).values_list("pk", flat=True)
    return [user_group(user.pk), *(job_group(pk) for pk in projects)]


class JobsConsumer(LiveConsumer):
    close_code = 4401
    groups_joined: list[str]

    async def connect(self) -> None:
        user = self.scope.get("user")
        if not isinstance(user, User) or not user.is_active:
            await self.close(code=4401)
            return
        recheck = await self.start_recheck(user)
        if recheck is None:
            await self.close(code=4401)
            return
        self.recheck = recheck
        self.groups_joined = await database_sync_to_async(_groups, thread_sensitive=False)(user)
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        # Joined first, then read: a change after the read still arrives as a message.
        uids = _watched(self.scope.get("query_string", b""))
        if uids:
            snapshot = await database_sync_to_async(job_state_snapshot, thread_sensitive=False)(
                user=user, uids=uids
            )
            for message in snapshot:
                await self.send_json(dict(message))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "recheck"):
            self.recheck.stop()
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def job_state(self, event: JobStateMessage) -> None:
        if not self.recheck.gone():
            await self.send_json(dict(event))

    async def session_revoked(self, event: dict[str, Any]) -> None:
        """The user's access changed: close; the page reconnects with what they may see now."""
        await self.close_unauthorised()
