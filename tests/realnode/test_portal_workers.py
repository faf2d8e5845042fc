"""Portal jobs of several workers on the real node: real containers find each other through the job's
headless Service (CoreDNS), reach each other through the tenant's default deny (kube-router's
firewall enforces the job's own policy), while another job of the same project cannot; torchrun's
rendezvous and a gloo all-reduce over the pod network; a worker that exits 1 fails the job and stops
the other. The reconcile task and the admission cycle are called inline, as in tests/workloads_e2e."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from deploy.localcluster.realnode import RealNode
from tests.fixtures.personas import World, session_client
from tests.realnode.helpers import run_to_end, submit_real
from tests.realnode.probes import Try, outcomes, shell_script
from tests.workloads_e2e.procs import wait_for
from tests.workloads_e2e.test_job_lifecycle import drive
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.builders import MPI_DIR
from workloads.k8s.client import RealKubeClient
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.models import Job
from workloads.services import jobs as services

pytestmark = pytest.mark.django_db
PORT = 8080

# Worker 0 answers on a port (a job's root filesystem is not its user's to write: no page to serve);
# worker 1 looks worker 0 up by the name it was given and reads the answer.
SERVE_AND_FETCH = f"""
if [ "$RANK" = 0 ]; then
  while :; do echo reached | nc -l -p {PORT}; done &
  trap 'exit 143' TERM; sleep 600 & wait
fi
name="$MASTER_ADDR.$NAMESPACE.svc.cluster.local"
i=0
until ip=$(nslookup "$name" 2>/dev/null | sed -n 's/^Address: *\\([0-9.]*\\)$/\\1/p' | tail -n 1) &&
    [ -n "$ip" ] &&
    nc -w 3 "$ip" {PORT} </dev/null | busybox grep -q reached; do
  i=$((i+1)); [ $i -ge 60 ] && {{ echo "worker 0 not reached as $name"; exit 1; }}; sleep 1
done
echo "worker $RANK of $WORLD_SIZE reached worker 0 ($name, $ip) after $i s"
"""


def worker_pods(kube: RealKubeClient, job: Job) -> dict[int, dict[str, Any]]:
    query = {"labelSelector": f"{UID_LABEL}={job.uid}"}
    pods = (kube.get(paths.pods(job.namespace), query) or {}).get("items") or []
    return {int(p["metadata"]["labels"][WORKER_INDEX_LABEL]): p for p in pods}


def streamed(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def pod_log(kube: RealKubeClient, job: Job, pod: dict[str, Any]) -> str:
    return kube.read_bytes(paths.pod_log(job.namespace, pod["metadata"]["name"])).decode()


def test_workers_reach_each_other_by_name_and_another_job_of_the_project_cannot(
    portal_on_real_node: RealKubeClient,
    real_node: RealNode,
    world: World,
    kube_api: client.ApiClient,
    k8s_namespace: str,
) -> None:
    kube = portal_on_real_node
    env = [{"name": "NAMESPACE", "value": world.alpha.namespace}]
    job = submit_real(world, SERVE_AND_FETCH, workers=2, env=env)
    drive(job, {JobState.RUNNING})
    assert job.planned_nodes == [real_node.name, real_node.name]

    def ended() -> str | None:
        pods = worker_pods(kube, job)
        done = pods.get(1, {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
        return pod_log(kube, job, pods[1]) if done else None

    log = wait_for(ended, 120, "worker 1 to fetch worker 0's page, or give up")
    assert "worker 1 of 2 reached worker 0" in log, log
    # The API reads one worker's log by its index (the pods found by their labels on the cluster).
    url = f"/api/v1/jobs/{job.uid}/logs/"
    reader = session_client(world.member)
    assert b"worker 1 of 2 reached" in streamed(reader.get(url, {"worker": "1"}))
    assert streamed(reader.get(url, {"worker": "0"})) == b""
    served = worker_pods(kube, job)[0]
    assert served["status"]["phase"] == "Running"
    ip = served["status"]["podIP"]

    # Another job of the same project, given worker 0's address: the job's policy opens its workers to
    # each other only. Settled first: a new pod's own rules come with the firewall's next sync.
    probe = Try("worker-0", ip, PORT)
    other = submit_real(world, shell_script([probe], settle=probe))
    drive(other, {JobState.SUCCEEDED, JobState.FAILED}, timeout=150)
    assert outcomes(other.log_tail) == {"worker-0": "refused"}, other.log_tail

    # And a pod with no policy of its own, in another namespace: only worker 0's side decides.
    core = client.CoreV1Api(kube_api)
    _, log = run_to_end(core, k8s_namespace, "open-probe", shell_script([probe]), timeout=90)
    assert outcomes(log) == {"worker-0": "refused"}, log

    services.job_cancel(actor=world.owner, job=job)
    drive(job, {JobState.CANCELLED})


def test_a_worker_that_exits_1_fails_the_job_and_stops_the_other(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World
) -> None:
    kube = portal_on_real_node
    script = (
        'if [ "$RANK" = 1 ]; then echo "worker 1 gives up"; sleep 2; exit 1; fi\n'
        "echo 'worker 0 waits'; trap 'exit 143' TERM; sleep 600 & wait"
    )
    job = submit_real(world, script, workers=2)
    drive(job, {JobState.FAILED}, timeout=120)
    assert job.exit_code == 1, job.state_reason
    assert job.state_reason.startswith("BackoffLimitExceeded"), job.state_reason

    def stopped() -> bool:
        pods = worker_pods(kube, job)
        return all(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods.values())

    wait_for(stopped, 60, "worker 0 stopped by the Job controller")
    assert "worker 1 gives up" in job.log_tail


def train_to_end(world: World, image: str, command: list[str]) -> Job:
    """Two workers of one GPU each on the real node run `command` to success."""
    data = {
        "image": image,
        "command": command,
        "workers": 2,
        "gpus": 1,
        "cpu_millicores": 500,
        "memory_mib": 1024,
        "placement": "real-node",
    }
    job = services.job_submit(actor=world.member, project=world.alpha, data=data)
    drive(job, {JobState.SUCCEEDED, JobState.FAILED}, timeout=240)
    assert job.state == JobState.SUCCEEDED, job.log_tail[-3000:]
    return job


def test_torchrun_rendezvous_and_a_gloo_all_reduce_across_two_workers(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World, train_image: str
) -> None:
    program = (
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "value = torch.tensor([float(dist.get_rank() + 1)])\n"
        "dist.all_reduce(value)\n"
        "print(f'rank {dist.get_rank()} of {dist.get_world_size()}: sum {value.item():.0f}', flush=True)\n"
    )
    # torchrun reads its node count, rank and rendezvous from the PET_ variables the portal sets.
    # Debian's torch 1.13 on Python 3.11 cannot parse its own default "0" for --redirects and --tee
    # (enum iteration skips the 0 and the combined members): stdout is teed instead (1).
    command = ["torchrun", "--redirects", "1", "--tee", "1", "--no_python", "python3", "-c", program]
    job = train_to_end(world, train_image, command)
    assert "==> worker 0" in job.log_tail
    assert "==> worker 1" in job.log_tail
    assert "[default0]:rank 0 of 2: sum 3" in job.log_tail
    assert "[default0]:rank 1 of 2: sum 3" in job.log_tail


def test_mpirun_all_reduce_across_two_workers_over_the_jobs_ssh_key(
    portal_on_real_node: RealKubeClient, real_node: RealNode, world: World, train_image: str
) -> None:
    program = (
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "total = comm.allreduce(comm.Get_rank() + 1)\n"
        "print(f'mpi rank {comm.Get_rank()} of {comm.Get_size()} on {MPI.Get_processor_name()}: "
        "sum {total}', flush=True)\n"
    )
    # Worker 0 runs mpirun once worker 1's SSH server takes the job's key; mpirun starts rank 1 there
    # over SSH, with the hostfile the portal wrote.
    job = train_to_end(
        world, train_image, [f"{MPI_DIR}/launch", "mpirun", "-np", "2", "python3", "-c", program]
    )
    worker_0, worker_1 = job.log_tail.split("==> worker 1")
    assert f"mpi rank 0 of 2 on {job.k8s_name}-0: sum 3" in worker_0, job.log_tail
    assert f"mpi rank 1 of 2 on {job.k8s_name}-1: sum 3" in worker_0, job.log_tail
    assert "Accepted publickey" in worker_1, job.log_tail
