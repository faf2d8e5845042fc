"""GPUs the portal does not offer (unhealthy, out of service) leave a node's free GPUs at once, and
are not subtracted again once the kubelet has dropped them from allocatable."""

from __future__ import annotations

import pytest

from gpu import selectors
from gpu.models import Gpu
from gpu.tests.factories import make_gpus, make_node
from workloads.admission.live import LiveCluster, node_states
from workloads.tests.fakes import fake_node


def _node(allocatable: int, capacity: int = 4) -> dict[str, object]:
    node = fake_node("n1", gpus=allocatable, slices=0)
    node["status"]["capacity"] = {"nvidia.com/gpu": str(capacity)}
    return node


def _free(node: dict[str, object], unoffered: int) -> int:
    live = LiveCluster(nodes=[node], pods=[])
    states = node_states(live, reserved={}, slices_per_gpu=4, unoffered={"n1": unoffered})
    return sum(n.free_gpus for n in states)  # a node with no GPU left is not listed at all


def test_an_unoffered_gpu_is_not_free_before_or_after_the_kubelet_drops_it() -> None:
    assert _free(_node(4), 0) == 4
    assert _free(_node(4), 1) == 3  # the portal knows first
    assert _free(_node(3), 1) == 3  # the kubelet caught up: not counted twice
    assert _free(_node(4), 4) == 0


@pytest.mark.django_db
def test_the_selector_counts_unhealthy_and_out_of_service_exclusive_gpus_per_node() -> None:

    a, b, c, _ = make_gpus(make_node("n1"), 4)
    Gpu.objects.filter(pk=a.pk).update(health="unhealthy")
    Gpu.objects.filter(pk=b.pk).update(in_service=False)
    Gpu.objects.filter(pk=c.pk).update(health="degraded")
    assert selectors.unoffered_whole_by_node() == {"n1": 2}
