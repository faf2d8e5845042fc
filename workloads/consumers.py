"""Live job states for the jobs list and job pages (one consumer per stream).

Authorises in connect(): anonymous sockets are closed; a user joins one group per project they
can see, so a message about another tenant's job never reaches them.
"""

from __future__ import annotations

import time
from typing import Any

from channels.generic.websocket import JsonWebsocketConsumer

from accounts.live import RECHECK_S, still_active, user_group
from accounts.models import User
from accounts.selectors import project_list
from workloads.messages import JobStateMessage, job_group


class JobsConsumer(JsonWebsocketConsumer):
    groups_joined: list[str]

    def connect(self) -> None:
        user = self.scope.get("user")
        if not isinstance(user, User) or not user.is_active:
            self.close(code=4401)
            return
        self.user_id = user.pk
        self.checked = time.monotonic()
        projects = project_list(user=user).values_list("pk", flat=True)
        self.groups_joined = [user_group(user.pk), *(job_group(pk) for pk in projects)]
        for group in self.groups_joined:
            self.channel_layer_group_add(group)
        self.accept()

    def channel_layer_group_add(self, group: str) -> None:
        from asgiref.sync import async_to_sync

        async_to_sync(self.channel_layer.group_add)(group, self.channel_name)

    def disconnect(self, code: int) -> None:
        from asgiref.sync import async_to_sync

        for group in getattr(self, "groups_joined", []):
            async_to_sync(self.channel_layer.group_discard)(group, self.channel_name)

    def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    def job_state(self, event: JobStateMessage) -> None:
        if time.monotonic() - self.checked > RECHECK_S:  # in case a revocation message was lost
            self.checked = time.monotonic()
            if not still_active(self.user_id):
                self.close(code=4401)
                return
        self.send_json(dict(event))

    def session_revoked(self, event: dict[str, Any]) -> None:
        """The user's access changed: close; the page reconnects with what they may see now."""
        self.close(code=4401)
