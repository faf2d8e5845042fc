"""A stopped controller lets go at once: its quiet watch streams are ended, not waited out, and its
lease is handed back, so a rollout's new leader takes over in seconds, not at the next bookmark.

Against the real API server: a watch with nothing to say blocks on its stream until the server's
next bookmark (about a minute) or the watch's own timeout (4 minutes).
"""

from __future__ import annotations

import logging
import threading

import pytest

from tests.workloads_e2e.conftest import wait_for
from workloads.controller.loop import Controller
from workloads.k8s.client import RealKubeClient
from workloads.k8s.watch import Watcher, WatchSpec

pytestmark = pytest.mark.cluster


def _ignore(*args: object) -> None:
    return None


def test_interrupt_ends_a_quiet_watch_at_once(
    kube: RealKubeClient, k8s_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    spec = WatchSpec(
        "quiet", f"/api/v1/namespaces/{k8s_namespace}/configmaps", "quiet=nothing", _ignore, _ignore
    )
    watcher = Watcher(client=kube, spec=spec, watch_timeout_s=240)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    wait_for(lambda: watcher.current, 30, "the first list")
    thread.join(timeout=2)  # now on the stream, which has nothing to say
    assert thread.is_alive()
    stop.set()
    watcher.interrupt()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the watch still waits on its stream after interrupt"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a stop is not a failure"


@pytest.mark.django_db(transaction=True)
def test_a_stopped_controller_ends_its_watches_and_hands_back_its_lease(kube: RealKubeClient) -> None:
    controller = Controller(client=kube, identity="stop-test", tick_s=0.5)
    stop = threading.Event()
    earlier = set(threading.enumerate())  # another test's leftovers are not this controller's
    runner = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    runner.start()
    wait_for(lambda: all(w.current for w in controller.watchers), 60, "the controller's watches")
    stop.set()
    runner.join(timeout=30)
    assert not runner.is_alive()
    left = [t.name for t in set(threading.enumerate()) - earlier if t.name.startswith("watch-")]
    assert not left, f"watch threads outlived the controller: {left}"
    lease = kube.get(controller.elector.path)
    assert lease is not None
    assert not lease["spec"].get("holderIdentity"), lease["spec"]
