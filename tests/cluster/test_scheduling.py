"""The real scheduler and Job controller against kwok GPU nodes."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.cluster.helpers import (
    DELAY_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    GPU,
    gpu_job,
    gpu_pod,
    job_condition,
    only_job_pod,
    pod_condition,
    pod_status,
    wait_for,
)

pytestmark = pytest.mark.cluster


def test_gpu_job_is_bound_run_and_completed(kube_api: client.ApiClient, k8s_namespace: str) -> None:
    core, batch = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)
    batch.create_namespaced_job(k8s_namespace, gpu_job("train", 2, {DELAY_ANNOTATION: "1s"}))

    wait_for(lambda: job_condition(batch, k8s_namespace, "train", "Complete"), 60, "Job Complete")

    pod = only_job_pod(core, k8s_namespace, "train")
    assert pod.status is not None
    assert pod.status.phase == "Succeeded"
    assert pod.spec is not None
    assert pod.spec.node_name
    node = core.read_node(pod.spec.node_name)
    assert node.metadata is not None
    assert node.metadata.labels is not None
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-GeForce-RTX-5090"
    assert node.status is not None
    assert node.status.allocatable is not None
    assert int(node.status.allocatable[GPU]) >= 2


def test_pod_asking_more_gpus_than_any_node_stays_pending(
    kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_pod(k8s_namespace, gpu_pod("too-big", 5))

    def unschedulable() -> client.V1PodCondition | None:
        cond = pod_condition(pod_status(core, k8s_namespace, "too-big"), "PodScheduled")
        return cond if cond is not None and cond.status == "False" else None

    cond = wait_for(unschedulable, 30, "PodScheduled=False")

    assert cond.reason == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in (cond.message or "")
    assert pod_status(core, k8s_namespace, "too-big").phase == "Pending"


def test_failing_pod_fails_its_job_with_the_exit_code(kube_api: client.ApiClient, k8s_namespace: str) -> None:
    core, batch = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)
    annotations = {DELAY_ANNOTATION: "1s", EXIT_CODE_ANNOTATION: "3"}
    batch.create_namespaced_job(k8s_namespace, gpu_job("crash", 1, annotations))

    cond = wait_for(lambda: job_condition(batch, k8s_namespace, "crash", "Failed"), 60, "Job Failed")

    assert cond.reason == "BackoffLimitExceeded"
    status = only_job_pod(core, k8s_namespace, "crash").status
    assert status is not None
    assert status.phase == "Failed"
    (container,) = status.container_statuses or []
    assert container.state is not None
    assert container.state.terminated is not None
    assert container.state.terminated.exit_code == 3
