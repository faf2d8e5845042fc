"""Live job states for the jobs list and job pages (one consumer per stream).

Authorises in connect(): anonymous sockets are closed; a user joins one group per project they
can see, so a message about another tenant's job never reaches them.

Async, with the ORM reached off the event loop and not thread-sensitive: a sync consumer runs every
socket's handlers on one shared thread, so under load (200 users, measured) connects would queue behind
each other's queries and time out.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from accounts.live import LiveConsumer, user_group
from accounts.models import User
from accounts.selectors import project_list
from workloads.messages import JobStateMessage, job_group


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
