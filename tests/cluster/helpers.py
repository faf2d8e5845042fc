"""Builders and polling for the control-plane tests; the objects are plain kubernetes models."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes import client

T = TypeVar("T")
GPU = "nvidia.com/gpu"
DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
EXIT_CODE_ANNOTATION = "gpuportal.dev/exit-code"


def wait_for(probe: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    """Poll until probe returns something truthy; generous timeouts because CI has 2 cores."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.25)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def container(gpus: int, *, privileged: bool | None = None) -> client.V1Container:
    limits = {GPU: str(gpus)} if gpus else None
    ctx = client.V1SecurityContext(privileged=privileged) if privileged is not None else None
    return client.V1Container(
        name="main",
        image="registry.invalid/gpu-job:1",  # never pulled: kwok runs nothing
        resources=client.V1ResourceRequirements(limits=limits),
        security_context=ctx,
    )


def gpu_pod(
    name: str, gpus: int, annotations: dict[str, str] | None = None, *, privileged: bool | None = None
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PodSpec(restart_policy="Never", containers=[container(gpus, privileged=privileged)]),
    )


def gpu_job(name: str, gpus: int, annotations: dict[str, str]) -> client.V1Job:
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(annotations=annotations),
        spec=client.V1PodSpec(restart_policy="Never", containers=[container(gpus)]),
    )
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(backoff_limit=0, template=template),
    )


def job_condition(
    batch: client.BatchV1Api, namespace: str, name: str, kind: str
) -> client.V1JobCondition | None:
    status = batch.read_namespaced_job_status(name, namespace).status
    conds = (status.conditions if status else None) or []
    return next((c for c in conds if c.type == kind and c.status == "True"), None)


def pod_status(core: client.CoreV1Api, namespace: str, name: str) -> client.V1PodStatus:
    status = core.read_namespaced_pod_status(name, namespace).status
    assert status is not None
    return status


def pod_condition(status: client.V1PodStatus, kind: str) -> client.V1PodCondition | None:
    return next((c for c in status.conditions or [] if c.type == kind), None)


def only_job_pod(core: client.CoreV1Api, namespace: str, job: str) -> client.V1Pod:
    (pod,) = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
    return pod
