"""A fresh local cluster has the namespace of the GPU sharing ConfigMap (the chart makes it for real)."""

from __future__ import annotations

import pytest
from kubernetes import client

from plugin.names import SHARING_CONFIG_NAMESPACE

pytestmark = pytest.mark.cluster


def test_the_sharing_configmap_namespace_exists(kube_api: client.ApiClient) -> None:
    namespace = client.CoreV1Api(kube_api).read_namespace(SHARING_CONFIG_NAMESPACE)
    assert namespace.status is not None
    assert namespace.status.phase == "Active"
