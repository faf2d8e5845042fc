"""How a portal job on the real node ends, through the product's own paths: its log followed through
the real ASGI server from before the container starts until it exits, and the TTL controller's
clean-up of a finished job (Job and pod gone; the portal keeps its record and serves the log).

Transactional: the live portal (daphne, another process) must see the test's rows."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.test import override_settings

from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import RealNode
from tests.fixtures.personas import World
from tests.realnode.helpers import submit_real
from tests.workloads_e2e.live_portal import drive_until, live_portal
from tests.workloads_e2e.procs import wait_for
from tests.workloads_e2e.test_job_lifecycle import drive
from tests.workloads_e2e.test_log_streams import _cookie, _follow
from workloads.choices import JobState
from workloads.k8s import labels, paths
from workloads.k8s.client import RealKubeClient
from workloads.logs import log_lines

pytestmark = pytest.mark.django_db(transaction=True)
TTL_S = 5


def test_a_log_followed_before_the_start_waits_for_the_container_and_ends_with_it(
    portal_on_real_node: RealKubeClient,
    k8s_cluster: ClusterHandle,
    tmp_path: Path,
    world: World,
    slow_container_start: None,
) -> None:
    # After the fixture's namespace prefix is in force; the follower looks at its job twice a second,
    # so it reaches the pod while its container is still being created (pods/log: 400).
    fast = {"GPUPORTAL_LOG_FOLLOW_POLL_SECONDS": "0.5"}
    with live_portal(k8s_cluster, tmp_path, env=fast) as base:
        _follow_to_the_end(base, world)


def _follow_to_the_end(base: str, world: World) -> None:
    job = submit_real(world, "sleep 2; echo start; for i in 1 2 3; do echo step $i; sleep 1; done; echo done")
    body: list[bytes] = []
    with _follow(base, job, _cookie(world.member)) as response:
        assert response.status == 200
        reader = threading.Thread(target=lambda: body.append(response.read()), daemon=True)
        reader.start()
        drive_until(job, JobState.RUNNING)
        reader.join(timeout=60)  # the stream ends when the container exits, not at a timeout
        assert not reader.is_alive(), "the followed log did not end when the container exited"
    text = body[0].decode()
    assert text.startswith("[waiting for the job to start: it is queued]"), text[:200]
    assert text.split("\n", 1)[1].split() == ["start", "step", "1", "step", "2", "step", "3", "done"], text
    drive_until(job, JobState.SUCCEEDED)


@override_settings(GPUPORTAL_JOB_TTL_SECONDS=TTL_S)
def test_the_ttl_controller_removes_a_finished_job_and_its_pod_and_the_portal_serves_the_log(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World
) -> None:
    job = submit_real(world, "echo kept; exit 0")
    drive(job, {JobState.SUCCEEDED})
    kube = portal_on_real_node
    selector = {"labelSelector": f"{labels.UID_LABEL}={job.uid}"}
    pods = (kube.get(paths.pods(job.namespace), selector) or {}).get("items") or []
    assert [p["spec"]["nodeName"] for p in pods] == [real_node.name]
    pod_uid = pods[0]["metadata"]["uid"]
    assert _containers_of(real_node, pod_uid), "the real node did not hold the finished pod's containers"

    path = paths.job(job.namespace, job.k8s_name)
    wait_for(lambda: kube.get(path) is None, 60, "the TTL controller removed the Job", every=1.0)
    wait_for(lambda: not (kube.get(paths.pods(job.namespace), selector) or {}).get("items"), 60, "pod gone")
    # The kubelet removes the stopped containers at its next garbage collection (every minute), which
    # this test does not wait for. The log is the portal's own copy now.
    assert b"".join(log_lines(job, follow=False)) == b"kept\n"
    drive(job, {JobState.SUCCEEDED})  # what the Job's DELETED event sends: nothing changes
    assert (job.state, job.exit_code, job.deleted_in_cluster_at) == (JobState.SUCCEEDED, 0, None)
    assert job.log_tail.split() == ["kept"]


def _containers_of(node: RealNode, pod_uid: str) -> list[str]:
    """containerd's containers on the node for the pod (its sandbox and its container)."""
    return node.ctr("containers", "list", "-q", f'labels."io.kubernetes.pod.uid"=={pod_uid}').split()
