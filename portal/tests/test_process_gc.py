"""The long-lived processes freeze what start-up built (as the web processes do in portal/asgi.py), so
full collections stop walking it: under the load test they paused the controller up to 441 ms and a worker's
pool process up to 357 ms."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from celery import signals
from django.core.management import call_command

import portal.celery  # noqa: F401 - connects the receivers under test
from portal.management.commands import controller as command


@pytest.fixture(autouse=True)
def _thawed() -> Any:
    gc.unfreeze()
    yield
    gc.unfreeze()


# Celery's Django fixup, also listening, warns when the signal comes without a worker.
@pytest.mark.filterwarnings("ignore::celery.fixups.django.FixupWarning")
@pytest.mark.parametrize("signal", [signals.worker_init, signals.worker_process_init])
def test_a_celery_worker_and_each_pool_process_freeze_at_start(signal: Any) -> None:
    assert gc.get_freeze_count() == 0
    signal.send(sender=None)
    assert gc.get_freeze_count() > 0


def test_the_controller_freezes_before_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    frozen: list[int] = []

    class Recording:
        def __init__(self, **kwargs: Any) -> None:
            pass

        def run(self, stop: threading.Event) -> None:
            frozen.append(gc.get_freeze_count())

    monkeypatch.setattr(command, "Controller", Recording)
    call_command("controller", "--tick", "1")
    assert frozen
    assert frozen[0] > 0
