"""Builders are pure: compared with whole dicts, no cluster, no database (kubespawner's test_objects)."""

from __future__ import annotations

import uuid
from typing import Any

from django.test import override_settings

from accounts.models import Project, Quota
from plugin.names import REAL_NODE_LABEL
from workloads.choices import Placement
from workloads.k8s import builders
from workloads.models import Job, ProjectVolume
from workloads.spec import EnvVar, JobSpec, Simulation, VolumeMount

UID = uuid.UUID("12345678-1234-5678-1234-567812345678")
LABELS = {
    "app.kubernetes.io/managed-by": "gpu-portal",
    "gpuportal.dev/job-uid": str(UID),
    "gpuportal.dev/project": "alpha",
}
SECURITY = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def make_spec(**fields: Any) -> JobSpec:
    defaults: dict[str, Any] = {
        "image": "registry.example.com/team/train:1.0",
        "gpus": 2,
        "gpu_type": "NVIDIA-GeForce-RTX-5090",
        "cpu_millicores": 2000,
        "memory_mib": 8192,
        "max_runtime_minutes": 30,
        "command": ["python"],
        "args": ["train.py"],
        "env": [EnvVar(name="EPOCHS", value="3")],
    }
    return JobSpec(**{**defaults, **fields})


def make_ids(**fields: Any) -> builders.JobIdentity:
    """The identity of job UID of project alpha (pk 7), from its row as the reconciler reads it."""
    job = Job(uid=UID, project=Project(pk=7, slug="alpha", name="Alpha"), **fields)
    return builders.job_identity(job)


@override_settings(GPUPORTAL_JOB_TTL_SECONDS=3600, GPUPORTAL_JOB_BACKOFF_LIMIT=0)
def test_build_job_renders_the_restricted_suspended_job() -> None:
    assert builders.build_job(make_spec(), make_ids(), simulation=False) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"job-{UID}", "namespace": "gp-alpha", "labels": LABELS},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "podReplacementPolicy": "Failed",
            "activeDeadlineSeconds": 1800,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 100_007,
                        "runAsGroup": 100_007,
                        "fsGroup": 100_007,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090"},
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example.com/team/train:1.0",
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python"],
                            "args": ["train.py"],
                            "env": [{"name": "EPOCHS", "value": "3"}],
                            "resources": {
                                "requests": {"cpu": "2000m", "memory": "8192Mi", "nvidia.com/gpu": "2"},
                                "limits": {"cpu": "2000m", "memory": "8192Mi", "nvidia.com/gpu": "2"},
                            },
                            "securityContext": SECURITY,
                        }
                    ],
                },
            },
        },
    }


@override_settings(GPUPORTAL_PROJECT_UID_BASE=200_000)
def test_each_project_runs_as_its_own_uid_and_gid() -> None:
    """Two tenants never share a UID: MPS would put them in one server, /dev/shm files in one owner."""
    contexts = []
    for pk, slug in ((3, "alpha"), (4, "beta")):
        ids = builders.job_identity(Job(uid=UID, project=Project(pk=pk, slug=slug, name=slug)))
        pod = builders.build_job(make_spec(), ids, simulation=False)["spec"]["template"]["spec"]
        contexts.append(pod["securityContext"])
    assert [(c["runAsUser"], c["runAsGroup"], c["fsGroup"]) for c in contexts] == [
        (200_003, 200_003, 200_003),
        (200_004, 200_004, 200_004),
    ]


def test_mps_slices_become_shared_gpu_requests_equal_to_limits() -> None:
    manifest = builders.build_job(make_spec(gpus=0, gpu_type="", mps_slices=3), make_ids(), simulation=False)
    pod = manifest["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "2000m", "memory": "8192Mi", "nvidia.com/gpu.shared": "3"},
        "limits": {"cpu": "2000m", "memory": "8192Mi", "nvidia.com/gpu.shared": "3"},
    }
    assert "nodeSelector" not in pod


def test_simulation_annotations_only_when_switched_on() -> None:
    spec = make_spec(simulate=Simulation(run_seconds=5, exit_code=3))
    assert (
        "annotations"
        not in builders.build_job(spec, make_ids(), simulation=False)["spec"]["template"]["metadata"]
    )
    assert builders.build_job(spec, make_ids(), simulation=True)["spec"]["template"]["metadata"][
        "annotations"
    ] == {
        "pod-complete.stage.kwok.x-k8s.io/delay": "5s",
        "gpuportal.dev/exit-code": "3",
    }


def test_volumes_come_only_from_project_claims() -> None:
    spec = make_spec(volumes=[VolumeMount(volume="data", mount_path="/data", read_only=False)])
    claim = ProjectVolume(name="data", claim_name="alpha-data", read_only=True)
    pod = builders.build_job(spec, make_ids(), claims={"data": claim}, simulation=False)["spec"]["template"][
        "spec"
    ]
    assert pod["volumes"] == [
        {"name": "vol-0", "persistentVolumeClaim": {"claimName": "alpha-data", "readOnly": True}}
    ]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "vol-0", "mountPath": "/data", "readOnly": True}]


def test_resource_quota_mirrors_the_project_quota() -> None:
    project = Project(slug="alpha", name="Alpha")
    quota = Quota(gpus=8, mps_slices=4, cpu_millicores=16000, memory_mib=65536, max_concurrent_jobs=5)
    assert builders.build_resource_quota(project, quota)["spec"] == {
        "hard": {
            "requests.nvidia.com/gpu": "8",
            "requests.nvidia.com/gpu.shared": "4",
            "requests.cpu": "16000m",
            "requests.memory": "65536Mi",
            "limits.memory": "65536Mi",
            "pods": "80",  # 5 jobs of up to 16 workers
            "count/jobs.batch": "10000",
        }
    }


def test_namespace_enforces_pod_security_restricted() -> None:
    labels = builders.build_namespace(Project(slug="alpha", name="Alpha"))["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"


def test_network_policy_denies_by_default() -> None:
    spec = builders.build_network_policy(Project(slug="alpha", name="Alpha"))["spec"]
    assert spec["podSelector"] == {}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in spec


def test_an_admitted_mps_job_is_pinned_to_its_planned_node() -> None:
    slices = make_spec(gpus=0, gpu_type="", mps_slices=2)
    assert (
        "affinity" not in builders.build_job(slices, make_ids(), simulation=False)["spec"]["template"]["spec"]
    )
    admitted = make_ids(planned_node="gpu-node-2")
    pod = builders.build_job(slices, admitted, simulation=False)["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-2"]}]}
        ]
    }
    whole = make_spec()  # whole GPUs: the scheduler places them as before
    assert "affinity" not in builders.build_job(whole, admitted, simulation=False)["spec"]["template"]["spec"]


def test_a_real_node_job_selects_and_tolerates_only_the_real_node() -> None:
    real = make_spec(placement=Placement.REAL_NODE)
    pod = builders.build_job(real, make_ids(), simulation=False)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090",
        REAL_NODE_LABEL: "true",
    }
    assert pod["tolerations"] == [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]
    assert (
        "tolerations"
        not in builders.build_job(make_spec(), make_ids(), simulation=False)["spec"]["template"]["spec"]
    )
