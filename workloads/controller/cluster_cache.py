"""The controller's watch-fed copy of the cluster's nodes and live pods, for its admission cycle.

The pass runs every tick (2 s) and needs every node and every live pod. LISTing them each time
cost the API server a full serialization of all pods per tick (tens of megabytes at 20,000 pods)
and this process the parsing of it. Instead the node watch the controller already runs (for the
gpu app's mirror) and one more watch, of all pods, keep two `Store`s; `live()` answers from them
while both streams are current (`Watcher.current`) and None otherwise (before the first list,
after a failed round), so the pass LISTs as before. The Celery sweep's pass always LISTs.

A copy lags the cluster by the stream's latency, as a LIST made a moment earlier would. The pods
are one snapshot, so a job's pod is never counted twice: while the copy shows it unbound, its
GPUs count as the job's reservation on the planned node (`Job.planned_node`), and once it shows
it bound, as the pod's requests there, not both. The namespace's ResourceQuota stays the backstop.
`pod_projection` keeps the pod fields admission reads; a reader of a new field must add it there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from workloads.admission.live import LiveCluster, is_live_pod, pod_projection
from workloads.k8s import paths
from workloads.k8s.store import Store
from workloads.k8s.watch import Watcher, WatchSpec, deliver_list

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NODES, LIVE_PODS = "nodes", "pods-all"


def _feeding(spec: WatchSpec, store: Store) -> WatchSpec:
    """The spec with the store fed first (it never fails), then the spec's own handlers."""

    def on_event(kind: str, obj: Obj) -> None:
        store.on_event(kind, obj)
        spec.on_event(kind, obj)

    def on_relist(items: list[Obj]) -> None:
        store.on_relist(items)
        deliver_list(spec, items)

    return replace(spec, on_event=on_event, on_relist=on_relist)


class ClusterCache:
    """Two stores fed by the controller's watches; `live()` is what the admission cycle reads."""

    def __init__(self) -> None:
        self.nodes = Store()
        self.pods = Store(keep=is_live_pod)
        self._watchers: list[Watcher] = []
        self._from_copy: bool | None = None  # how the last pass read the cluster, for the log

    def specs(self, specs: Sequence[WatchSpec]) -> list[WatchSpec]:
        """The controller's specs with the node watch feeding the node store, plus the pod watch."""
        if not any(s.name == NODES for s in specs):
            raise ValueError("the cluster cache needs the controller's node watch")
        out = [_feeding(s, self.nodes) if s.name == NODES else s for s in specs]
        pods = WatchSpec(
            LIVE_PODS, paths.ALL_PODS, None, self.pods.on_event, self.pods.on_relist, transform=pod_projection
        )
        return [*out, pods]

    def bind(self, watchers: Sequence[Watcher]) -> None:
        """The watchers running the specs, whose health says whether the stores can be trusted."""
        self._watchers = [w for w in watchers if w.spec.name in (NODES, LIVE_PODS)]

    def live(self) -> LiveCluster | None:
        """The nodes and live pods from the copy, or None when it is not to be trusted now (the
        caller LISTs them). A switch either way is logged once."""
        trusted = (
            len(self._watchers) == 2
            and all(w.current for w in self._watchers)
            and self.nodes.synced
            and self.pods.synced
        )
        if trusted != self._from_copy:
            log.info("admission reads the cluster from %s", "the watch-fed copy" if trusted else "LISTs")
            self._from_copy = trusted
        if not trusted:
            return None
        # By name, as a LIST returns them: placement breaks ties in node order.
        nodes = sorted(self.nodes.items(), key=lambda n: str(n["metadata"].get("name", "")))
        return LiveCluster(nodes, self.pods.items())
