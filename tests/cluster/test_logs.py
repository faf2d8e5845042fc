"""Container logs through the API server's pods/log, served by kwok from a file."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.cluster.helpers import gpu_pod, pod_status, wait_for

pytestmark = pytest.mark.cluster


def test_pod_logs_are_readable_through_the_api(kube_api: client.ApiClient, k8s_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_pod(k8s_namespace, gpu_pod("chatty", 1))
    wait_for(lambda: pod_status(core, k8s_namespace, "chatty").phase == "Running", 30, "pod Running")

    text = core.read_namespaced_pod_log("chatty", k8s_namespace, container="main")

    assert "found 4 x NVIDIA GeForce RTX 5090" in text
    assert "step 3/3 done" in text
