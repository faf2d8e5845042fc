"""Admission the API server enforces itself: ResourceQuota and Pod Security."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.cluster.helpers import gpu_pod, wait_for

pytestmark = pytest.mark.cluster


def _quota_ready(core: client.CoreV1Api, namespace: str) -> bool:
    status = core.read_namespaced_resource_quota("gpus", namespace).status
    return status is not None and status.hard is not None


def test_gpu_quota_rejects_the_third_gpu_pod(kube_api: client.ApiClient, k8s_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="gpus"),
        spec=client.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": "2"}),
    )
    core.create_namespaced_resource_quota(k8s_namespace, quota)
    # Admission only charges a quota once the quota controller has filled in its status.
    wait_for(lambda: _quota_ready(core, k8s_namespace), 30, "quota status")
    core.create_namespaced_pod(k8s_namespace, gpu_pod("gpu-a", 1))
    core.create_namespaced_pod(k8s_namespace, gpu_pod("gpu-b", 1))

    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(k8s_namespace, gpu_pod("gpu-c", 1))

    assert err.value.status == 403
    assert "exceeded quota" in (err.value.body or "")


def test_restricted_namespace_rejects_a_privileged_pod(
    kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    core.patch_namespace(k8s_namespace, {"metadata": {"labels": labels}})

    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(k8s_namespace, gpu_pod("root", 1, privileged=True))

    body = err.value.body or ""
    assert err.value.status == 403
    assert "violates PodSecurity" in body
    assert "privileged" in body
