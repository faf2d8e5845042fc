"""Leader election through a coordination.k8s.io Lease (one active controller; others wait).

Writes use the Lease's resourceVersion (PUT), so two candidates racing for an expired Lease
cannot both win: the loser gets 409 Conflict and keeps waiting. A leader that cannot renew
within the lease duration must stop acting (`lost` is set).
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from plugin.names import parse_time
from workloads.k8s import paths
from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, *, client: KubeClient, namespace: str, name: str, identity: str, duration_s: int = 15
    ) -> None:
        self.client = client
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration_s = duration_s
        self.lost = threading.Event()

    @property
    def path(self) -> str:
        return paths.lease(self.namespace, self.name)

    def _spec(self, acquired: str | None, transitions: int) -> dict[str, Any]:
        now = _fmt(_now())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_s,
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire(self) -> bool:
        """One attempt to take or renew the lease; True when we hold it now."""
        current = self.client.get(self.path)
        if current is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(None, 0),
            }
            return self.client.create(paths.leases(self.namespace), body) is not None
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
        duration = int(spec.get("leaseDurationSeconds") or self.duration_s)
        expired = renewed is None or renewed + timedelta(seconds=duration) < _now()
        if holder not in (self.identity, None, "") and not expired:
            return False
        mine = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        current["spec"] = self._spec(spec.get("acquireTime") if mine else None, transitions)
        try:
            self.client.replace(self.path, current)
        except K8sError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def acquire(self, stop: threading.Event, retry_s: float = 2.0) -> bool:
        """Block until we lead (True) or stop is set (False)."""
        while not stop.is_set():
            try:
                if self.try_acquire():
                    log.info("leader election: %s leads %s/%s", self.identity, self.namespace, self.name)
                    return True
            except K8sError:
                log.warning("leader election: API error; retrying", exc_info=True)
            stop.wait(retry_s)
        return False

    def renew_loop(self, stop: threading.Event) -> None:
        """Renew every third of the duration; set `lost` when renewal fails for a whole duration."""
        last_ok = _now()
        while not stop.wait(self.duration_s / 3):
            try:
                if self.try_acquire():
                    last_ok = _now()
                    continue
            except K8sError:
                log.warning("leader election: renew failed", exc_info=True)
            if _now() - last_ok > timedelta(seconds=self.duration_s):
                log.error("leader election: lost the lease")
                self.lost.set()
                return

    def release(self) -> None:
        try:
            current = self.client.get(self.path)
            if current and (current.get("spec") or {}).get("holderIdentity") == self.identity:
                current["spec"]["holderIdentity"] = None
                self.client.replace(self.path, current)
        except K8sError:
            log.warning("leader election: release failed", exc_info=True)
