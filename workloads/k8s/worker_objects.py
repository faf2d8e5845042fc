"""Pure builders of what a job of several workers needs beside its Job: the gate its pods wait
behind, the launch variables, the headless Service, the NetworkPolicy between its workers, and the
SSH key pair and launcher MPI and DeepSpeed use. Tested by dict equality."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from workloads.k8s.identity import JSON, JobIdentity, job_labels, owned_by
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.spec import JobSpec
from workloads.spec.declaration import LAUNCH_ENV

# A job of several workers: its pods wait behind this gate until each is pinned to its planned node,
# and the gates of all of them are lifted in one pass (workloads/k8s/workers.py).
WORKER_GATE = "gpuportal.dev/workers-placed"
MASTER_PORT = 29500  # torchrun's default rendezvous port
# Where each worker finds the job's key pair, its hostfile and the launcher (docs/user-guide.md).
MPI_DIR = "/etc/gpuportal/mpi"
SSH_SECRET_TYPE = "gpuportal.dev/job-ssh"  # noqa: S105 (a Secret type, not a password)
MPI_LAUNCH = (Path(__file__).parent / "mpi-launch.sh").read_text()


@dataclass(frozen=True)
class SshKey:
    """An OpenSSH key pair: the private key in OpenSSH's PEM form, the public one as a line."""

    private: str
    public: str


def worker_host(ids: JobIdentity, index: int) -> str:
    """Worker `index`'s DNS name inside its namespace: its pod's hostname under the job's headless
    Service (an Indexed Job names each pod's host `<job>-<index>`)."""
    return f"{ids.name}-{index}.{ids.name}"


def launch_env(spec: JobSpec, ids: JobIdentity) -> list[JSON]:
    """torchrun's names (and the plain ones MPI and DeepSpeed launchers read): the first worker is the
    rendezvous, each worker's rank is its completion index."""
    rank = {"valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{WORKER_INDEX_LABEL}']"}}}
    master = worker_host(ids, 0)
    plain = {
        "MASTER_ADDR": master,
        "MASTER_PORT": str(MASTER_PORT),
        "WORLD_SIZE": str(spec.workers),
        "PET_NNODES": str(spec.workers),
        "PET_NPROC_PER_NODE": str(max(1, spec.gpus)),
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": str(MASTER_PORT),
    }
    return [{"name": n, "value": plain[n]} if n in plain else {"name": n, **rank} for n in LAUNCH_ENV]


def node_pin(node: str) -> JSON:
    """A pod's affinity to exactly one node, by name."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def worker_release(node: str) -> JSON:
    """The merge patch that pins a gated worker's pod to its planned node and lifts its gate (a gated
    pod's affinity may still be set; the scheduler sees the pod only once its gates are gone)."""
    return {"spec": {"affinity": node_pin(node), "schedulingGates": []}}


def build_worker_service(ids: JobIdentity, job: JSON) -> JSON:
    """The headless Service that gives each worker of a job its DNS name (`worker_host`), ready or not:
    the rendezvous starts before any worker is ready."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": ids.name,
            "namespace": ids.namespace,
            "labels": job_labels(ids),
            "ownerReferences": owned_by(job),
        },
        "spec": {
            "clusterIP": "None",
            "selector": {UID_LABEL: str(ids.uid)},
            "publishNotReadyAddresses": True,
        },
    }


def build_worker_policy(ids: JobIdentity, job: JSON) -> JSON:
    """The tenant's default deny, opened between one job's workers, on any port, and nothing else."""
    workers = [{"podSelector": {"matchLabels": {UID_LABEL: str(ids.uid)}}}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": f"{ids.name}-workers",
            "namespace": ids.namespace,
            "labels": job_labels(ids),
            "ownerReferences": owned_by(job),
        },
        "spec": {
            "podSelector": {"matchLabels": {UID_LABEL: str(ids.uid)}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": workers}],
            "egress": [{"to": workers}],
        },
    }


def ssh_secret_name(ids: JobIdentity) -> str:
    return f"{ids.name}-ssh"


def hostfile(spec: JobSpec, ids: JobIdentity) -> str:
    """Open MPI's and DeepSpeed's hostfile: a line per worker with a slot per GPU. Worker 0 by its own
    hostname, which mpirun recognises as the local node (it starts no SSH server)."""
    slots = max(1, spec.gpus)
    hosts = [ids.name + "-0"] + [worker_host(ids, i) for i in range(1, spec.workers)]
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def build_worker_ssh(spec: JobSpec, ids: JobIdentity, job: JSON, key: SshKey) -> JSON:
    """The job's own SSH key pair (client key, host key and the one authorised key at once), hostfile
    and launcher, for its workers only: a Secret their pods mount at MPI_DIR."""
    files = {
        "id_ed25519": key.private,
        "id_ed25519.pub": key.public + "\n",
        "hostfile": hostfile(spec, ids),
        "launch": MPI_LAUNCH,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SSH_SECRET_TYPE,
        "metadata": {
            "name": ssh_secret_name(ids),
            "namespace": ids.namespace,
            "labels": job_labels(ids),
            "ownerReferences": owned_by(job),
        },
        "data": {name: base64.b64encode(text.encode()).decode() for name, text in files.items()},
    }


def worker_ssh_volume(ids: JobIdentity) -> tuple[JSON, JSON]:
    """The pod volume and container mount of the job's SSH Secret. Readable by the project's group
    (the pod's fsGroup) only; owned by root, which OpenSSH accepts for a key it cannot change."""
    volume = {
        "name": "mpi",
        "secret": {
            "secretName": ssh_secret_name(ids),
            "defaultMode": 0o440,
            "items": [
                {"key": "id_ed25519", "path": "id_ed25519"},
                {"key": "id_ed25519.pub", "path": "id_ed25519.pub"},
                {"key": "hostfile", "path": "hostfile"},
                {"key": "launch", "path": "launch", "mode": 0o550},
            ],
        },
    }
    return volume, {"name": "mpi", "mountPath": MPI_DIR, "readOnly": True}
