"""T03: hostile job requests answer 400 before any cluster call; accepted ones render restricted specs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.personas import World, api_client
from workloads.k8s.client import set_client
from workloads.models import Job, ProjectVolume
from workloads.tests.conftest import IMAGE, allow_images
from workloads.tests.fakes import FakeKube

pytestmark = pytest.mark.django_db
DIGEST = "sha256:" + "b" * 64
SECRET_ENV = {"name": "T", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}

HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("privileged", {"privileged": True}),
    ("securityContext", {"securityContext": {"privileged": True}}),
    ("runAsUser 0", {"runAsUser": 0}),
    ("pod securityContext root", {"podSecurityContext": {"runAsUser": 0}}),
    ("allowPrivilegeEscalation", {"allowPrivilegeEscalation": True}),
    ("capabilities", {"capabilities": {"add": ["SYS_ADMIN"]}}),
    ("hostPath volume", {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
    ("hostPath via volume key", {"volumes": [{"volume": "data", "mount_path": "/x", "hostPath": "/"}]}),
    ("foreign claim", {"volumes": [{"volume": "beta-data", "mount_path": "/data"}]}),
    ("raw pvc", {"volumes": [{"persistentVolumeClaim": {"claimName": "other"}}]}),
    ("mount over /etc", {"volumes": [{"volume": "data", "mount_path": "/etc"}]}),
    ("mount traversal", {"volumes": [{"volume": "data", "mount_path": "/data/../../etc"}]}),
    ("relative mount", {"volumes": [{"volume": "data", "mount_path": "data"}]}),
    ("hostNetwork", {"hostNetwork": True}),
    ("hostPID", {"hostPID": True}),
    ("hostIPC", {"hostIPC": True}),
    ("hostPort", {"ports": [{"containerPort": 80, "hostPort": 80}]}),
    ("nodeName", {"nodeName": "gpu-node-0"}),
    ("nodeSelector", {"nodeSelector": {"kubernetes.io/hostname": "gpu-node-0"}}),
    ("affinity", {"affinity": {"nodeAffinity": {}}}),
    ("tolerations", {"tolerations": [{"operator": "Exists"}]}),
    ("priorityClassName", {"priorityClassName": "system-node-critical"}),
    ("serviceAccountName", {"serviceAccountName": "default"}),
    ("automountServiceAccountToken", {"automountServiceAccountToken": True}),
    ("podSpecPatch", {"podSpecPatch": "{}"}),
    ("raw pod spec", {"spec": {"containers": []}}),
    ("envFrom secret", {"envFrom": [{"secretRef": {"name": "db"}}]}),
    ("env secretKeyRef", {"env": [SECRET_ENV]}),
    ("env fieldRef", {"env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}),
    ("env KUBERNETES_", {"env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "evil"}]}),
    ("env NVIDIA_", {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}),
    ("env CUDA_", {"env": [{"name": "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "value": "100"}]}),
    ("env lower-case prefix", {"env": [{"name": "nvidia_visible_devices", "value": "all"}]}),
    ("env bad name", {"env": [{"name": "A=B", "value": "x"}]}),
    ("namespace field", {"namespace": "gp-beta"}),
    ("foreign project", {"project": "beta"}),
    ("gpus -1", {"gpus": -1}),
    ("gpus 0.5", {"gpus": 0.5}),
    ("gpus 10**6", {"gpus": 10**6}),
    ("gpus string", {"gpus": "4"}),
    ("gpus bool", {"gpus": True}),
    ("gpus over the site max", {"gpus": 9}),
    ("mps and gpus", {"gpus": 1, "mps_slices": 1}),
    ("mps negative", {"mps_slices": -2}),
    ("cpu huge", {"cpu_millicores": 10**9}),
    ("memory huge", {"memory_mib": 10**9}),
    ("runtime over quota", {"max_runtime_minutes": 10**6}),
    ("image outside allow-list", {"image": "docker.io/library/ubuntu:24.04"}),
    ("image implicit docker hub", {"image": "team/train:1.0"}),
    ("image prefix trick", {"image": "registry.example.com/team/train-evil:1"}),
    ("image sub-repository", {"image": "registry.example.com/team/train/evil:1"}),
    ("image lookalike host", {"image": "registry.example.com.evil.io/team/train:1"}),
    ("image other port", {"image": "registry.example.com:5000/team/train:1"}),
    ("image credentials", {"image": "u:p@registry.example.com/team/train:1"}),
    ("image short digest", {"image": "registry.example.com/team/train@sha256:abc"}),
    ("image digest of other repo", {"image": f"evil.io/team/train@{DIGEST}"}),
    ("image upper-case", {"image": "REGISTRY.EXAMPLE.COM/team/train:1"}),
    ("image newline", {"image": "registry.example.com/team/train:1\nprivileged: true"}),
    ("gpu_type injection", {"gpu_type": "x\nnodeName: n"}),
    ("command not list", {"command": "rm -rf /"}),
    ("args with objects", {"args": [{"a": 1}]}),
    ("simulate off", {"simulate": {"exit_code": 1}}),
    ("priority bogus", {"priority": "system-cluster-critical"}),
]


@pytest.fixture
def recording_kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    set_client(fake)
    try:
        yield fake
    finally:
        set_client(None)


def test_there_are_at_least_40_payloads() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize(("label", "payload"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_payload_is_400_with_no_cluster_call(
    world: World, recording_kube: FakeKube, label: str, payload: dict[str, Any]
) -> None:
    allow_images(world.alpha)
    ProjectVolume.objects.create(project=world.beta, name="beta-data", claim_name="beta-data")
    body = {"project": "alpha", "image": IMAGE, **payload}
    response = api_client(world.member).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, (label, response.content)
    assert response.json()["error"]["fields"], label
    assert Job.objects.count() == 0
    assert recording_kube.calls == []
