"""Hostile job requests answer 400, and after the work an accepted request would start has run,
nothing of theirs is on the real cluster; accepted ones render restricted specs."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.fixtures.personas import World, api_client
from tests.workloads_e2e import conftest as e2e
from workloads.admission.cycle import admission_cycle
from workloads.k8s.client import RealKubeClient
from workloads.models import Job, ProjectVolume
from workloads.tasks import reconcile_job
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db
# The real local cluster, as the end-to-end tests get it (tests/workloads_e2e/conftest.py).
kube = e2e.kube
_nodes_reachable_by_ip = e2e._nodes_reachable_by_ip
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
    ("workers 0", {"workers": 0}),
    ("workers string", {"workers": "2"}),
    ("workers over the site max", {"workers": 17}),
    ("workers times GPUs over the quota", {"workers": 16, "gpus": 1}),
    ("workers with MPS slices", {"workers": 2, "gpus": 0, "mps_slices": 1}),
    ("workers set their own rendezvous", {"workers": 2, "env": [{"name": "MASTER_ADDR", "value": "evil"}]}),
    ("workers indexed completion", {"completionMode": "Indexed", "completions": 4}),
    ("scheduling gates", {"schedulingGates": []}),
]


def settle_on_the_cluster() -> None:
    """The work an accepted request starts (admission, then one reconcile per job), run now."""
    admission_cycle()
    for job_id in Job.objects.values_list("pk", flat=True):
        reconcile_job(job_id)


def on_the_cluster(kube: RealKubeClient, namespace: str) -> list[str]:
    found: list[str] = []
    for kind, path in (("job", "apis/batch/v1"), ("pod", "api/v1")):
        body = kube.get(f"/{path}/namespaces/{namespace}/{kind}s") or {}
        found += [f"{kind}/{item['metadata']['name']}" for item in body.get("items") or []]
    return found


def submit(world: World, payload: dict[str, Any], capture: Any) -> Any:
    allow_images(world.alpha)
    ProjectVolume.objects.create(project=world.beta, name="beta-data", claim_name="beta-data")
    # The cluster fixture turns job simulation on for kwok; requests are judged as in production.
    with capture(execute=True), override_settings(GPUPORTAL_JOB_SIMULATION=False):
        response = api_client(world.member).post(
            "/api/v1/jobs/", {"project": "alpha", "image": IMAGE, **payload}, format="json"
        )
    settle_on_the_cluster()
    return response


def test_there_are_at_least_40_payloads() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.django_db(transaction=True)
def test_an_accepted_request_does_reach_the_cluster(
    world: World, kube: RealKubeClient, django_capture_on_commit_callbacks: Any
) -> None:
    """The control for the test below: the same steps put a benign job's Job on the cluster."""
    response = submit(world, {"cpu_millicores": 100, "memory_mib": 64}, django_capture_on_commit_callbacks)
    assert response.status_code == 201, response.content
    assert any(name.startswith("job/") for name in on_the_cluster(kube, world.alpha.namespace))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("label", "payload"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_payload_is_400_and_nothing_reaches_the_cluster(
    world: World,
    kube: RealKubeClient,
    django_capture_on_commit_callbacks: Any,
    label: str,
    payload: dict[str, Any],
) -> None:
    response = submit(world, payload, django_capture_on_commit_callbacks)
    assert response.status_code == 400, (label, response.content)
    assert response.json()["error"]["fields"], label
    assert Job.objects.count() == 0
    assert on_the_cluster(kube, world.alpha.namespace) == [], label
