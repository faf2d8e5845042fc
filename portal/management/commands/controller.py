"""`python manage.py controller`: the leader-elected watch + admission process (workloads.controller)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

import portal.celery  # noqa: F401 - the controller publishes tasks through the portal's Celery app
from portal.gcfreeze import freeze_startup_objects
from workloads.controller.loop import Controller


class Command(BaseCommand):
    help = "Watch Jobs, Pods and Events in the portal's namespaces and run the admission loop."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--identity", default=None, help="Lease holder name (default host-pid).")
        parser.add_argument("--tick", type=float, default=2.0, help="Seconds between admission cycles.")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()

        def _stop(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        controller = Controller(identity=options["identity"], tick_s=options["tick"])
        freeze_startup_objects()  # its full collections paused admission (portal/gcfreeze.py)
        controller.run(stop)
