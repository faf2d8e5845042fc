"""Job-spec injection, cluster half: every accepted request renders a pod the restricted namespace admits
(server-side dry run against the real API server, a Hypothesis sample), and the hostile
manifests, sent straight to the cluster, are refused by its own Pod Security admission.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import Project
from tests.workloads_e2e.conftest import _nodes_reachable_by_ip as _nodes_reachable_by_ip
from tests.workloads_e2e.conftest import kube as kube
from workloads.k8s import builders, paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.errors import K8sError
from workloads.models import Job, ProjectVolume
from workloads.services.cluster_sync import namespace_sync
from workloads.spec import JobSpec, SpecLimits, parse_spec

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
MAXIMA = {
    "gpus": 8,
    "mps_slices": 8,
    "cpu_millicores": 16000,
    "memory_mib": 65536,
    "max_runtime_minutes": 600,
}
LIMITS = SpecLimits(
    images=frozenset({("registry.example.com", "team/train")}),
    volumes={"data": False},
    maxima=MAXIMA,
    simulation=True,
)
names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True).filter(
    lambda n: not n.startswith(("KUBERNETES_", "NVIDIA_", "CUDA_"))
)
text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)
gpu_part = st.one_of(
    st.fixed_dictionaries(
        {"gpus": st.integers(0, 8)},
        optional={"gpu_type": st.sampled_from(["NVIDIA-GeForce-RTX-5090", "H100"])},
    ),
    st.fixed_dictionaries({"mps_slices": st.integers(1, 8)}),
)
requests = st.builds(
    lambda gpu, rest: {**gpu, **rest},
    gpu_part,
    st.fixed_dictionaries(
        {
            "image": st.sampled_from(
                [
                    "registry.example.com/team/train",
                    "registry.example.com/team/train:2.1",
                    "registry.example.com/team/train@sha256:" + "c" * 64,
                ]
            )
        },
        optional={
            "command": st.lists(text, max_size=3),
            "args": st.lists(text, max_size=3),
            "env": st.lists(
                st.fixed_dictionaries({"name": names, "value": text}),
                max_size=3,
                unique_by=lambda e: e["name"],
            ),
            "cpu_millicores": st.integers(100, 16000),
            "memory_mib": st.integers(64, 65536),
            "max_runtime_minutes": st.integers(1, 600),
            "priority": st.sampled_from(["low", "normal", "high"]),
            "preemptible": st.booleans(),
            "volumes": st.just([{"volume": "data", "mount_path": "/data"}]),
            "simulate": st.fixed_dictionaries({"run_seconds": st.integers(0, 60)}),
        },
    ),
)


def as_pod(manifest: dict[str, Any]) -> dict[str, Any]:
    template = manifest["spec"]["template"]
    meta = {"name": f"dry-{uuid.uuid4().hex[:10]}", "labels": template["metadata"]["labels"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


@pytest.fixture
def restricted(kube: RealKubeClient) -> Project:
    project = Project.objects.create(slug=f"dry{uuid.uuid4().hex[:6]}", name="Dry run")
    from accounts.models import Quota

    Quota.objects.create(
        project=project,
        gpus=64,
        mps_slices=64,
        cpu_millicores=10**6,
        memory_mib=10**7,
        max_concurrent_jobs=100,
    )
    namespace_sync(project=project, client=kube)
    return project


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=requests)
def test_every_accepted_request_renders_an_admissible_pod(
    data: dict[str, Any], restricted: Project, kube: RealKubeClient
) -> None:
    spec = parse_spec(data, LIMITS)
    ids = builders.job_identity(Job(project=restricted))
    claims = {"data": ProjectVolume(name="data", claim_name="data-claim")}
    manifest = builders.build_job(spec, ids, claims=claims, simulation=True)
    kube.create(paths.jobs(restricted.namespace), manifest, dry_run=True)
    kube.create(paths.pods(restricted.namespace), as_pod(manifest), dry_run=True)


HOSTILE_PATCHES: list[tuple[str, dict[str, Any]]] = [
    (
        "privileged",
        {"containers": [{"securityContext": {"privileged": True, "allowPrivilegeEscalation": True}}]},
    ),
    ("hostPath", {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
    ("hostNetwork", {"hostNetwork": True}),
    ("hostPID", {"hostPID": True}),
    ("runAsUser 0", {"securityContext": {"runAsUser": 0, "runAsNonRoot": False}}),
    (
        "capabilities",
        {"containers": [{"securityContext": {"capabilities": {"add": ["SYS_ADMIN"], "drop": []}}}]},
    ),
    ("privilege escalation", {"containers": [{"securityContext": {"allowPrivilegeEscalation": True}}]}),
    ("hostPort", {"containers": [{"ports": [{"containerPort": 80, "hostPort": 80}]}]}),
]


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if key == "containers":
            _merge(into["containers"][0], value[0])
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


@pytest.mark.parametrize(("label", "patch"), HOSTILE_PATCHES, ids=[h[0] for h in HOSTILE_PATCHES])
def test_the_cluster_refuses_hostile_pods_directly(
    restricted: Project,
    kube: RealKubeClient,
    label: str,
    patch: dict[str, Any],
) -> None:
    spec = JobSpec(image="registry.example.com/team/train:1")
    pod = as_pod(builders.build_job(spec, builders.job_identity(Job(project=restricted)), simulation=False))
    _merge(pod["spec"], patch)
    with pytest.raises(K8sError) as info:
        kube.create(paths.pods(restricted.namespace), pod, dry_run=True)
    assert info.value.status == 403, label
    assert "PodSecurity" in info.value.message or "forbidden" in info.value.message
