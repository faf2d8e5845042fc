"""The queue sees each shared GPU with the slice count operators set on it, not a cluster-wide 4."""

from __future__ import annotations

import pytest
from django.utils import timezone

from gpu.choices import SharingMode
from gpu.models import Gpu
from gpu.tests.factories import make_gpus, make_node
from tests.fixtures.personas import World
from workloads.admission.live import LiveCluster
from workloads.admission.state import cluster_state
from workloads.tests.fakes import fake_node

pytestmark = pytest.mark.django_db


def _sizes(live: LiveCluster, name: str) -> list[int]:
    node = next(n for n in cluster_state(now=timezone.now(), live=live).nodes if n.name == name)
    return [gpu.total_slices for gpu in node.shared]


def test_per_gpu_slice_counts_reach_the_queue(world: World) -> None:
    mirror = make_node("kwok-gpu-0")
    first, second, *_ = make_gpus(mirror, 4)
    Gpu.objects.filter(pk=first.pk).update(sharing_mode=SharingMode.SHARED, slices=4)
    Gpu.objects.filter(pk=second.pk).update(sharing_mode=SharingMode.SHARED, slices=2)
    live = LiveCluster(nodes=[fake_node("kwok-gpu-0", gpus=2, slices=6)], pods=[])
    assert _sizes(live, "kwok-gpu-0") == [4, 2]


def test_without_a_matching_plan_the_default_applies(world: World) -> None:
    live = LiveCluster(nodes=[fake_node("kwok-gpu-1", gpus=2, slices=8)], pods=[])
    assert _sizes(live, "kwok-gpu-1") == [4, 4]
