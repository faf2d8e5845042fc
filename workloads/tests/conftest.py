from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from accounts.models import Project
from tests.fixtures.personas import World
from workloads.k8s.client import set_client
from workloads.models import ImageRule, ProjectVolume
from workloads.services import publisher
from workloads.tests.fakes import FakeKube

IMAGE = "registry.example.com/team/train:1.0"


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    set_client(fake)
    try:
        yield fake
    finally:
        set_client(None)


def allow_images(project: Project) -> None:
    ImageRule.objects.create(project=project, registry="registry.example.com", repository="team/train")
    ProjectVolume.objects.create(project=project, name="data", claim_name="alpha-data")


@pytest.fixture
def jobs_world(world: World) -> World:
    allow_images(world.alpha)
    allow_images(world.beta)
    return world


def capture_sends(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Record, instead of sending, the tasks of one name that the publisher sends; every other task
    still goes to the broker. An entry is the task's one argument, or the tuple of its arguments."""
    real = publisher.send
    captured: list[Any] = []

    def send(task: str, *args: Any, **options: Any) -> bool:
        if task != name:
            return real(task, *args, **options)
        captured.append(args[0] if len(args) == 1 else args)
        return True

    monkeypatch.setattr(publisher, "send", send)
    return captured
