"""Leader election on a real coordination.k8s.io Lease: one leader, a second replica waits."""

from __future__ import annotations

import threading
import uuid

import pytest

from workloads.k8s.client import RealKubeClient
from workloads.k8s.lease import LeaderElector

pytestmark = pytest.mark.cluster


def test_a_second_replica_waits_until_the_leader_lets_go(kube: RealKubeClient) -> None:
    name = f"t-lease-{uuid.uuid4().hex[:6]}"
    first = LeaderElector(client=kube, namespace="default", name=name, identity="a", duration_s=15)
    second = LeaderElector(client=kube, namespace="default", name=name, identity="b", duration_s=15)
    assert first.try_acquire()
    assert first.try_acquire(), "the holder renews"
    assert not second.try_acquire(), "a second replica must wait"
    stop = threading.Event()
    waiter = threading.Thread(target=second.acquire, args=(stop, 0.5), daemon=True)
    waiter.start()
    waiter.join(timeout=2)
    assert waiter.is_alive(), "still waiting while the lease is held"
    first.release()
    waiter.join(timeout=10)
    stop.set()
    assert not waiter.is_alive()
    assert not first.try_acquire()
    lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] >= 1
