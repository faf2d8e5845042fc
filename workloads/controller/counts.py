"""The controller's watch figures for /metrics: relists, expired watches (410 Gone), failed rounds.

The controller serves no /metrics, and its `Watcher.stats` are plain integers of its own process.
Each tick adds what grew since the last one to the shared totals (gpu/counters.py, one Redis
hash), which every web replica reads at scrape time (workloads/metrics.py). A Redis outage loses
nothing: the shared counters keep unsent increments in this process and send them later.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpu import counters
from workloads.k8s.watch import Watcher, WatchStats

RELISTS = "gpuportal_watch_relists"  # every full LIST: start, after 410 Gone, periodic resync
EXPIRED = "gpuportal_watch_expired"  # 410 Gone: the resourceVersion was too old, a relist follows
ERRORS = "gpuportal_watch_errors"  # a failed list or watch round (backed off, then resumed)


def _figures(stats: WatchStats) -> dict[str, int]:
    return {RELISTS: stats.relists, EXPIRED: stats.gone, ERRORS: stats.errors}


class WatchCounts:
    """Deltas of each watcher's stats since the last flush, added to the shared totals."""

    def __init__(self, watchers: Sequence[Watcher]) -> None:
        self.watchers = watchers
        self.sent: dict[str, dict[str, int]] = {}

    def flush(self) -> None:
        increments: dict[str, float] = {}
        for watcher in self.watchers:
            now = _figures(watcher.stats)  # ints the watch threads bump; reading one is atomic
            before = self.sent.get(watcher.spec.name, {})
            for metric, n in now.items():
                if n > before.get(metric, 0):
                    increments[counters.field(metric, (watcher.spec.name,))] = n - before.get(metric, 0)
            self.sent[watcher.spec.name] = now
        if increments:
            counters.add(increments)
