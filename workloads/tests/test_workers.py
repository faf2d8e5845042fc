"""Jobs of several workers through the database path (fake cluster): the spec's rules, one admission
for all workers, the Indexed Job and its gated pods released together, the Service and the policy.
The real cluster's versions are in tests/workloads_e2e/test_workers_cluster.py."""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.models import Quota
from gpu.models import Node
from tests.fixtures.personas import World, session_client
from workloads.accounting import fair_share_usage, gpu_hours_row, slice_plan
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState
from workloads.k8s import builders, paths, worker_objects
from workloads.k8s.builders import WORKER_GATE
from workloads.k8s.errors import K8sError
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.k8s.reconcilers.job import JobReconciler
from workloads.k8s.workers import workers_to_release
from workloads.models import Job, QueueSettings
from workloads.queue.fairshare import running_records
from workloads.queue.tests.factory import at, running
from workloads.services import cluster_sync
from workloads.services import jobs as services
from workloads.spec import JobSpec
from workloads.tests.conftest import IMAGE
from workloads.tests.fakes import FakeKube, fake_node
from workloads.tests.test_views import FORM

pytestmark = pytest.mark.django_db


def submit(world: World, **spec: Any) -> Job:
    data = {"image": IMAGE, "gpus": 4, "workers": 2, **spec}
    return services.job_submit(actor=world.member, project=world.alpha, data=data)


def errors_of(world: World, **spec: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        submit(world, **spec)
    return caught.value.message_dict


def admitted(world: World, fake: FakeKube) -> Job:
    """A job of 2 workers of 4 GPUs on two fake nodes, admitted and its Kubernetes Job made."""
    fake.nodes = [fake_node("n0"), fake_node("n1")]
    job = submit(world)
    assert admission_cycle() == [job.pk]
    cluster_sync.job_reconcile(job_id=job.pk, client=fake)
    job.refresh_from_db()
    return job


def gated_pod(job: Job, index: int, **extra: Any) -> dict[str, Any]:
    labels = {UID_LABEL: str(job.uid), WORKER_INDEX_LABEL: str(index)}
    return {
        "metadata": {"name": f"{job.k8s_name}-{index}-x", "labels": labels, **extra},
        "spec": {
            "schedulingGates": [{"name": WORKER_GATE}],
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(job.gpus)}}}],
        },
        "status": {"phase": "Pending"},
    }


def streamed(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def make_pods(fake: FakeKube, job: Job, indices: range) -> None:
    for index in indices:
        pod = gated_pod(job, index)
        fake.objects[f"{paths.pods(job.namespace)}/{pod['metadata']['name']}"] = pod


def test_several_workers_take_whole_gpus_within_the_quota_and_leave_the_launch_names_alone(
    jobs_world: World,
) -> None:
    Quota.objects.filter(project=jobs_world.alpha).update(gpus=8)
    assert (
        "MPS slices are for a job of one worker"
        in errors_of(jobs_world, gpus=0, mps_slices=1)["mps_slices"][0]
    )
    (message,) = errors_of(jobs_world, workers=3)["workers"]
    assert message.startswith("3 workers of 4 GPUs is 12 GPUs, more than this project's quota of 8")
    env = {"MASTER_ADDR": "evil", "EPOCHS": "3"}
    assert errors_of(jobs_world, env=env)["env"] == [
        "MASTER_ADDR: set by the portal for each worker of a job of several."
    ]
    assert "workers" in errors_of(jobs_world, workers=17)
    assert submit(jobs_world, env={"MASTER_ADDR": "mine"}, workers=1).workers == 1  # one worker: its own


def test_the_queue_admits_all_workers_in_one_decision_and_reserves_each_planned_node(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    Quota.objects.filter(project=jobs_world.alpha).update(gpus=17)
    fake_kube.nodes = [fake_node(f"n{i}") for i in range(3)]
    big = submit(jobs_world, workers=4)
    assert admission_cycle() == []
    big.refresh_from_db()
    assert big.queue_explanation["numbers"] == {"need": 4, "workers": 4, "fit": 3, "nodes": 3}
    assert not fake_kube.objects or all("/pods/" not in p for p in fake_kube.objects)
    fake_kube.nodes.append(fake_node("n3"))
    assert admission_cycle() == [big.pk]
    big.refresh_from_db()
    assert sorted(big.planned_nodes) == ["n0", "n1", "n2", "n3"]
    assert big.planned_node == big.planned_nodes[0]
    # Admitted, no pod bound yet: every planned node is reserved, so a small job finds none.
    small = submit(jobs_world, workers=1, gpus=1)
    assert admission_cycle() == []
    small.refresh_from_db()
    assert small.queue_explanation["code"] == "no_node"


def test_gated_workers_are_released_together_once_all_exist_with_their_service_and_policy(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    fake_kube.nodes = [fake_node("n0"), fake_node("n1")]
    job = submit(jobs_world)
    assert admission_cycle() == [job.pk]
    job.refresh_from_db()
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    made = fake_kube.objects[paths.job(job.namespace, job.k8s_name)]
    assert made["spec"]["completionMode"] == "Indexed"
    assert made["spec"]["suspend"] is False
    made["metadata"]["uid"] = "k8s-uid-1"  # what the API server gives the Job

    make_pods(fake_kube, job, range(1))  # the Job controller has made one of two so far
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    assert not [c for c in fake_kube.calls if c[0] == "PATCH" and "/pods/" in c[1]]
    assert f"{paths.services(job.namespace)}/{job.k8s_name}" not in fake_kube.objects

    make_pods(fake_kube, job, range(1, 2))
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    service = fake_kube.objects[f"{paths.services(job.namespace)}/{job.k8s_name}"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["ownerReferences"][0]["uid"] == "k8s-uid-1"
    policy = fake_kube.objects[f"{paths.network_policies(job.namespace)}/{job.k8s_name}-workers"]
    assert policy["spec"]["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {UID_LABEL: str(job.uid)}}}]}
    ]
    secret = fake_kube.objects[f"{paths.secrets(job.namespace)}/{job.k8s_name}-ssh"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "k8s-uid-1"
    files = {name: base64.b64decode(value).decode() for name, value in secret["data"].items()}
    key = serialization.load_ssh_private_key(files["id_ed25519"].encode(), password=None)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert files["id_ed25519.pub"].startswith(public.decode() + " ")
    name = job.k8s_name
    assert files["hostfile"] == f"{name}-0 slots=4\n{name}-1.{name} slots=4\n"
    assert files["launch"].startswith("#!/bin/sh")
    for index in range(2):
        pod = fake_kube.objects[f"{paths.pods(job.namespace)}/{job.k8s_name}-{index}-x"]
        assert pod["spec"]["schedulingGates"] == []
        assert pod["spec"]["affinity"] == builders.node_pin(job.planned_nodes[index])


def test_only_gated_live_workers_with_every_index_present_are_released() -> None:
    job = Job(workers=3)
    pods = [gated_pod(job, i) for i in range(3)]
    planned = ["a", "b", "c"]
    assert [node for _, node in workers_to_release(pods, planned, 3)] == ["a", "b", "c"]
    assert workers_to_release(pods[:2], planned, 3) == []
    assert workers_to_release(pods, planned[:2], 3) == []
    leaving = [*pods[:2], gated_pod(job, 2, deletionTimestamp="2026-12-07T00:00:00Z")]
    assert workers_to_release(leaving, planned, 3) == []
    pods[0]["spec"]["schedulingGates"] = []
    assert [node for _, node in workers_to_release(pods, planned, 3)] == ["b", "c"]


def test_a_job_of_several_workers_is_an_indexed_job_with_launch_wiring() -> None:

    spec = JobSpec(image=IMAGE, gpus=2, workers=3, env=[])
    ids = builders.JobIdentity(
        uid=uuid.UUID(int=7), name="job-x", namespace="gp-a", project="a", posix_id=5000
    )
    job = builders.build_job(spec, ids, simulation=False)
    assert (job["spec"]["parallelism"], job["spec"]["completions"], job["spec"]["backoffLimit"]) == (3, 3, 0)
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "job-x"
    assert pod["schedulingGates"] == [{"name": WORKER_GATE}]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["MASTER_ADDR"]["value"] == env["PET_MASTER_ADDR"]["value"] == "job-x-0.job-x"
    assert (env["WORLD_SIZE"]["value"], env["PET_NNODES"]["value"], env["PET_NPROC_PER_NODE"]["value"]) == (
        "3",
        "3",
        "2",
    )
    rank = f"metadata.annotations['{WORKER_INDEX_LABEL}']"
    assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == rank
    assert env["NODE_RANK"] == {"name": "NODE_RANK", **env["RANK"]} | {"name": "NODE_RANK"}
    # The job's SSH Secret, mounted into its workers only: group-readable, the launcher runnable.
    assert pod["volumes"] == [builders.worker_ssh_volume(ids)[0]]
    assert pod["volumes"][0]["secret"]["secretName"] == "job-x-ssh"
    assert {i["path"]: i.get("mode") for i in pod["volumes"][0]["secret"]["items"]}["launch"] == 0o550
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "mpi", "mountPath": builders.MPI_DIR, "readOnly": True}
    ]
    one = builders.build_job(JobSpec(image=IMAGE, gpus=2), ids, simulation=False)
    assert "completionMode" not in one["spec"]
    assert "schedulingGates" not in one["spec"]["template"]["spec"]
    assert "volumes" not in one["spec"]["template"]["spec"]


def test_the_form_submits_workers_and_the_page_shows_where_each_runs(
    jobs_world: World, fake_kube: FakeKube
) -> None:

    fake_kube.nodes = [fake_node("n0"), fake_node("n1")]
    client = session_client(jobs_world.member)
    form = client.get("/jobs/submit/").content.decode()
    assert 'name="workers"' in form
    response = client.post("/jobs/submit/", {**FORM, "workers": 2, "gpus": 4})
    assert response.status_code == 302
    job = Job.objects.get()
    assert (job.workers, job.gpus) == (2, 4)
    assert admission_cycle() == [job.pk]
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert "2, all started together: " in page
    assert "0 on <code>n0</code>" in page
    assert "1 on <code>n1</code>" in page
    assert "each worker: 4 GPUs" in page
    shown = client.get(f"/api/v1/jobs/{job.uid}/").json()
    assert (shown["workers"], shown["worker_nodes"]) == (2, ["n0", "n1"])


def test_the_log_kept_of_a_job_of_several_workers_has_each_worker_first_to_last(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = admitted(jobs_world, fake_kube)
    make_pods(fake_kube, job, range(2))
    for index, text in ((1, b"rank 1 ready\nsum 3\n"), (0, b"rank 0 ready\nsum 3\n")):
        fake_kube.logs[paths.pod_log(job.namespace, f"{job.k8s_name}-{index}-x")] = text
    job.refresh_from_db()
    cluster_sync.capture_log(JobReconciler(job, fake_kube, claims={}))
    job.refresh_from_db()
    assert job.log_tail == (
        f"==> worker 0 ({job.k8s_name}-0-x) <==\nrank 0 ready\nsum 3\n\n"
        f"==> worker 1 ({job.k8s_name}-1-x) <==\nrank 1 ready\nsum 3\n"
    )


def test_the_log_of_one_worker_is_read_by_its_index(jobs_world: World, fake_kube: FakeKube) -> None:
    job = admitted(jobs_world, fake_kube)
    make_pods(fake_kube, job, range(2))
    for index in range(2):
        fake_kube.logs[paths.pod_log(job.namespace, f"{job.k8s_name}-{index}-x")] = f"rank {index}\n".encode()
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, pod_name=f"{job.k8s_name}-0-x")
    client = session_client(jobs_world.member)
    url = f"/api/v1/jobs/{job.uid}/logs/"
    assert streamed(client.get(url)) == b"rank 0\n"
    assert streamed(client.get(url, {"worker": "1"})) == b"rank 1\n"
    for bad in ("-1", "x"):
        response = client.get(url, {"worker": bad})
        assert response.status_code == 400, bad
        assert "0 to 1 (this job has 2 workers)" in response.json()["error"]["fields"]["worker"][0], bad
    response = client.get(url, {"worker": "2"})
    assert response.status_code == 404
    assert (
        response.json()["error"]["message"]
        == "This job has no worker 2: a worker's index is 0 to 1 (this job has 2 workers)."
    )


def test_a_workers_log_is_the_kept_tail_while_the_cluster_cannot_list_pods(
    jobs_world: World, fake_kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = admitted(jobs_world, fake_kube)
    Job.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, pod_name=f"{job.k8s_name}-0-x", log_tail="kept\n"
    )

    def unavailable(path: str, query: dict[str, str] | None = None) -> None:
        raise K8sError(503, "the API server is restarting")

    monkeypatch.setattr(fake_kube, "get", unavailable)
    response = session_client(jobs_world.member).get(f"/api/v1/jobs/{job.uid}/logs/", {"worker": "1"})
    assert (response.status_code, streamed(response)) == (200, b"kept\n")


def test_gpu_hours_and_fair_share_count_every_worker(jobs_world: World) -> None:

    job = submit(jobs_world)  # 2 workers x 4 GPUs
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        state=JobState.SUCCEEDED, started_at=now - timedelta(hours=1), finished_at=now
    )
    job.refresh_from_db()
    assert job.gpu_hours() == pytest.approx(8.0)
    row = gpu_hours_row(job, now, plan=slice_plan())
    assert (row["gpus"], row["gpu_hours"]) == (8, pytest.approx(8.0))
    usage = fair_share_usage(now=now, half_life_hours=168.0)
    assert usage.projects[jobs_world.alpha.slug] == pytest.approx(8.0, rel=1e-3)
    (record,) = running_records([running(1, "a", "n0", 4, workers=2, started_at=at(0))], at(0), at(3600), 4)
    assert record.gpu_hours == pytest.approx(8.0)


def test_nodes_held_for_a_long_waiting_job_are_marked_for_the_tiles(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    Quota.objects.filter(project=jobs_world.alpha).update(gpus=16)
    fake_kube.nodes = [fake_node(f"n{i}") for i in range(4)]
    for i in range(4):
        Node.objects.create(name=f"n{i}")
    for i in range(3):  # pods of another namespace keep three nodes half full
        fake_kube.objects[f"/api/v1/namespaces/other/pods/p{i}"] = {
            "metadata": {"name": f"p{i}", "labels": {}},
            "spec": {
                "nodeName": f"n{i}",
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"}}}],
            },
            "status": {"phase": "Running"},
        }
    big = submit(jobs_world, workers=4)
    Job.objects.filter(pk=big.pk).update(submitted_at=timezone.now() - timedelta(hours=1))
    assert admission_cycle() == []
    marks = dict(Node.objects.values_list("name", "held_for"))
    assert marks == {f"n{i}": f"{jobs_world.alpha.slug}/{big}" for i in range(4)}
    big.refresh_from_db()
    assert "are held for it as they free up" in big.queue_explanation["sentence"]
    client = session_client(jobs_world.member)
    page = client.get("/cluster/").content.decode()
    assert page.count("held for a waiting job of several workers") == 4  # the project's name is not shown
    Job.objects.filter(pk=big.pk).update(state=JobState.CANCELLED)
    admission_cycle()
    assert set(Node.objects.values_list("held_for", flat=True)) == {""}


def fail_worker(fake: FakeKube, job: Job, index: int) -> None:
    """What the Job controller shows after a worker exits 1: the pod failed, the Job failed."""
    pod = fake.objects[f"{paths.pods(job.namespace)}/{job.k8s_name}-{index}-x"]
    pod["status"] = {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 1}}}]}
    made = fake.objects[paths.job(job.namespace, job.k8s_name)]
    made["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}


def drop_pods(fake: FakeKube, job: Job) -> None:
    for path in [p for p in fake.objects if p.startswith(f"{paths.pods(job.namespace)}/{job.k8s_name}-")]:
        del fake.objects[path]


def test_a_failed_worker_starts_every_worker_again_while_restarts_are_left(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    QueueSettings.objects.update_or_create(pk=1, defaults={"workers_restarts": 1})
    fake_kube.nodes = [fake_node("n0"), fake_node("n1")]
    job = submit(jobs_world)
    assert admission_cycle() == [job.pk]
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    fake_kube.objects[paths.job(job.namespace, job.k8s_name)]["metadata"]["uid"] = "first"
    make_pods(fake_kube, job, range(2))
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    fail_worker(fake_kube, job, 1)

    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    job.refresh_from_db()
    assert (job.state, job.restarts) == (JobState.PREEMPTED, 1)
    assert job.state_reason == (
        "BackoffLimitExceeded (exit code 1): all 2 workers start again (restart 1 of 1)"
    )
    assert paths.job(job.namespace, job.k8s_name) not in fake_kube.objects  # the failed Job is gone
    assert admission_cycle() == []  # its pods are still there: it waits for them to go
    drop_pods(fake_kube, job)
    assert admission_cycle() == [job.pk]  # back at the front, admitted again as a whole
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    remade = fake_kube.objects[paths.job(job.namespace, job.k8s_name)]
    assert remade["spec"]["suspend"] is False
    assert "status" not in remade
    remade["metadata"]["uid"] = "second"

    make_pods(fake_kube, job, range(2))
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    fail_worker(fake_kube, job, 0)
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    job.refresh_from_db()
    assert (job.state, job.restarts, job.exit_code) == (JobState.FAILED, 1, 1)  # no restart left


def test_workers_wait_while_an_earlier_jobs_service_is_being_collected(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = admitted(jobs_world, fake_kube)
    fake_kube.objects[paths.job(job.namespace, job.k8s_name)]["metadata"]["uid"] = "second"
    service = f"{paths.services(job.namespace)}/{job.k8s_name}"
    fake_kube.objects[service] = {"metadata": {"name": job.k8s_name, "ownerReferences": [{"uid": "first"}]}}
    make_pods(fake_kube, job, range(2))
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    pod = fake_kube.objects[f"{paths.pods(job.namespace)}/{job.k8s_name}-0-x"]
    assert pod["spec"]["schedulingGates"] == [{"name": WORKER_GATE}]  # not yet: the old Service
    del fake_kube.objects[service]  # collected with its Job
    cluster_sync.job_reconcile(job_id=job.pk, client=fake_kube)
    assert pod["spec"]["schedulingGates"] == []
    assert fake_kube.objects[service]["metadata"]["ownerReferences"][0]["uid"] == "second"


def test_the_mpi_launcher_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is missing: run deploy/setup/system-deps.sh")
    script = Path(worker_objects.__file__).parent / "mpi-launch.sh"
    out = subprocess.run([shellcheck, "--shell=sh", str(script)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout
