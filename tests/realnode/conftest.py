"""Fixtures for the tests against the optional real node (deploy/localcluster/README.md, "Real node").

These tests run only inside the run's own network namespace, with their own control plane, Postgres
and Redis: `make test` runs them through deploy/localcluster/realnode/run-tests.sh. Run alone, or
outside that namespace, they fail with a message saying so (never a skip).

- `real_node` (session): a started `RealNode` of the run-wide `k8s_cluster`; stopped at the end of
  the session, which fails if the host is not as found. One real node per machine at a time, so the
  tests that start their own (test_node_lifecycle.py) run before the first user of this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import portal.localcluster.netns as netns
from portal.localcluster import ClusterHandle
from portal.localcluster.realnode import RealNode, start_real_node

OWN_NODE_MODULES = ("test_node_lifecycle.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable sort: the tests with a node of their own first, before the shared one takes the lock.
    items.sort(key=lambda item: Path(str(item.path)).name not in OWN_NODE_MODULES)


def require_netns() -> None:
    if netns.current() is None:
        pytest.fail(
            "the real-node tests run only inside the run's own network namespace: "
            "make test does this (deploy/localcluster/realnode/run-tests.sh), or run "
            "`python -m portal.localcluster.netns run -- bash deploy/localcluster/realnode/run-tests.sh`",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def real_node(k8s_cluster: ClusterHandle) -> Iterator[RealNode]:
    require_netns()
    node = start_real_node(k8s_cluster)
    try:
        yield node
    finally:
        left = node.stop()
    assert not left, f"the real node left the host changed: {left}"
