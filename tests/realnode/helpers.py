"""Pods for the real node: real images loaded from local archives, never pulled."""

from __future__ import annotations

import contextlib
import subprocess
from typing import Any

from kubernetes import client

from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import config as rc
from tests.cluster.helpers import wait_for
from tests.fixtures.personas import World
from workloads.models import Job
from workloads.services import jobs as services


def real_pod(
    name: str,
    script: str,
    *,
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    hostname: str | None = None,
    subdomain: str | None = None,
) -> client.V1Pod:
    """A busybox pod pinned to the real node (its label and taint), running `sh -c script`; the
    hostname and subdomain name it in a headless Service's DNS."""
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            hostname=hostname,
            subdomain=subdomain,
            restart_policy="Never",
            automount_service_account_token=False,
            node_selector={rc.REAL_NODE_LABEL: "true"},
            tolerations=[client.V1Toleration(key=rc.REAL_NODE_LABEL, operator="Exists", effect="NoSchedule")],
            termination_grace_period_seconds=2,
            containers=[
                client.V1Container(
                    name="main",
                    image=rc.BUSYBOX_IMAGE,
                    image_pull_policy="Never",
                    command=["sh", "-c", script],
                    resources=client.V1ResourceRequirements(limits=limits),
                )
            ],
        ),
    )


def read_pod(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    """The pod as plain data (snake_case keys), which reads more simply than the optional models."""
    pod: dict[str, Any] = core.read_namespaced_pod(name, namespace).to_dict()
    return pod


def wait_terminated(
    core: client.CoreV1Api, namespace: str, name: str, timeout: float = 60.0
) -> dict[str, Any]:
    """The container's end, once the pod's phase says it ended too (the phase comes a little later)."""

    def probe() -> dict[str, Any] | None:
        status = read_pod(core, namespace, name)["status"]
        if status["phase"] not in ("Succeeded", "Failed"):
            return None
        ends = [s["state"]["terminated"] for s in status["container_statuses"] or []]
        return next((e for e in ends if e), None)

    return wait_for(probe, timeout, f"pod {name} to end")


def kubectl(cluster: ClusterHandle, *args: str) -> str:
    argv = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}"
    return proc.stdout


def run_to_end(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    script: str,
    limits: dict[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> tuple[int, str]:
    """Run a pod on the real node to its end: its exit code and its log (read through the kubelet)."""
    core.create_namespaced_pod(namespace, real_pod(name, script, limits=limits, labels=labels))
    ended = wait_terminated(core, namespace, name, timeout)
    log: str = core.read_namespaced_pod_log(name, namespace)
    return ended["exit_code"], log


def log_vars(log: str) -> dict[str, str]:
    """NAME=value lines of a pod's log (what `env` printed)."""
    return dict(line.split("=", 1) for line in log.splitlines() if "=" in line)


def allocatable(core: client.CoreV1Api, node: str) -> dict[str, str]:
    values: dict[str, str] = core.read_node(node).to_dict()["status"]["allocatable"]
    return values


def delete_pods(core: client.CoreV1Api, namespace: str, names: list[str], timeout: float = 60.0) -> None:
    """Delete at once and wait until the kubelet has stopped them and they are gone."""
    for name in names:
        with contextlib.suppress(client.ApiException):
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def gone() -> bool:
        left = {p.to_dict()["metadata"]["name"] for p in core.list_namespaced_pod(namespace).items}
        return not left & set(names)

    wait_for(gone, timeout, f"pods {names} to go")


def submit_real(world: World, command: str, **spec: Any) -> Job:
    """A portal job on the real node: `sh -c command` in the busybox image built here."""
    data = {
        "image": rc.BUSYBOX_IMAGE,
        "command": ["sh", "-c", command],
        "gpus": 1,
        "cpu_millicores": 100,
        "memory_mib": 64,
        "placement": "real-node",
        **spec,
    }
    return services.job_submit(actor=world.member, project=world.alpha, data=data)
