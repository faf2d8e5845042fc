"""Fixtures of the chart tests: helm/kubectl on the session's cluster and one shared release."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.localcluster import ClusterHandle
from tests.helm.chart import Kube
from tests.helm.release import Release


@pytest.fixture(scope="session")
def kube(k8s_cluster: ClusterHandle) -> Kube:
    return Kube(k8s_cluster.kubeconfig)


@pytest.fixture(scope="session")
def release(kube: Kube) -> Iterator[Release]:
    installed = Release(kube)
    installed.install()
    yield installed
    installed.uninstall()
