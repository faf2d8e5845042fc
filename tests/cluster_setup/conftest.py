"""Fixtures of the cluster setup tests: helm and kubectl on the session's local cluster."""

from __future__ import annotations

import pytest

from deploy.localcluster import ClusterHandle
from tests.helm.chart import Kube


@pytest.fixture(scope="session")
def kube(k8s_cluster: ClusterHandle) -> Kube:
    return Kube(k8s_cluster.kubeconfig)
