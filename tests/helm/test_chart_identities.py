"""The portal works under the chart's identities, not the admin kubeconfig: each role's client
signs in with a token of its own ServiceAccount (TokenRequest on the installed release), and the
default client points nowhere, so any call made with the wrong identity fails the test.

provisioner: the tenant namespace and its RoleBindings; controller: admission; worker: the
Kubernetes Job (create, un-suspend, delete) and a node's sharing ConfigMap and cordon; web: the log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import override_settings
from kubernetes import config

from deploy.localcluster import ClusterHandle, GpuNodeSpec
from deploy.localcluster.nodes import node_manifest
from gpu import services as gpu_services
from gpu.choices import SharingMode
from gpu.tests.factories import make_gpus
from tests.fixtures.personas import World
from tests.helm.release import RELEASE, Release
from tests.helm.test_chart_rbac import tenant_bindings
from tests.workloads_e2e.procs import wait_for
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient, set_client
from workloads.k8s.errors import K8sError
from workloads.logs import log_lines
from workloads.models import Job
from workloads.services import jobs as job_services
from workloads.services.cluster_sync import job_reconcile, namespace_reconcile
from workloads.services.nodes import node_sync
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
ROLES = ("web", "worker", "controller", "provisioner")


def _client(release: Release, admin: Path, identity: str, tmp_path: Path) -> RealKubeClient:
    token = release.kube.kubectl(
        "create", "token", f"{RELEASE}-{identity}", "-n", release.namespace, "--duration=1h"
    ).strip()
    kubeconfig = yaml.safe_load(admin.read_text())
    kubeconfig["users"] = [{"name": identity, "user": {"token": token}}]
    for context in kubeconfig["contexts"]:
        context["context"]["user"] = identity
    path = tmp_path / f"{identity}.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    return RealKubeClient(config.new_client_from_config(config_file=str(path)))  # type: ignore[no-untyped-call]


@pytest.fixture
def as_chart(
    release: Release, k8s_cluster: ClusterHandle, tmp_path: Path
) -> Iterator[dict[str, RealKubeClient]]:
    clients = {role: _client(release, k8s_cluster.kubeconfig, role, tmp_path) for role in ROLES}
    bindings = {
        role: [f"{ns}:{name}" for ns, name in refs] for role, refs in tenant_bindings(release).items()
    }
    with override_settings(
        GPUPORTAL_KUBECONFIG=str(tmp_path / "no-such-kubeconfig"),  # nothing falls back to the admin
        GPUPORTAL_NAMESPACE_PREFIX="gp-",
        GPUPORTAL_TENANT_ROLE_BINDINGS=bindings,
        GPUPORTAL_JOB_SIMULATION=True,
        GPU_PLUGIN_CONFIG_NAMESPACE=release.node_namespace,
    ):
        set_client(None)
        yield clients
        set_client(None)


def _submit(world: World, run_seconds: int) -> Job:
    data = {
        "image": IMAGE,
        "gpus": 1,
        "cpu_millicores": 100,
        "memory_mib": 64,
        "simulate": {"run_seconds": run_seconds},
    }
    return job_services.job_submit(actor=world.member, project=world.alpha, data=data)


def _drive(job: Job, clients: dict[str, RealKubeClient], until: set[str]) -> Job:
    def step() -> Job | None:
        admission_cycle(client=clients["controller"])
        job_reconcile(job_id=job.pk, client=clients["worker"])
        job.refresh_from_db()
        return job if job.state in until else None

    return wait_for(step, 90, f"{job} in {until}", every=1.0)


def test_a_job_lifecycle_under_the_charts_identities(
    world: World, as_chart: dict[str, RealKubeClient]
) -> None:
    allow_images(world.alpha)
    with pytest.raises(K8sError) as refused:  # the worker may not make namespaces: only the provisioner
        namespace_reconcile(project_id=world.alpha.pk, client=as_chart["worker"])
    assert refused.value.status == 403
    kinds = namespace_reconcile(project_id=world.alpha.pk, client=as_chart["provisioner"])
    assert kinds == [
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "NetworkPolicy",
        "RoleBinding",
        "RoleBinding",
    ]
    done, cancelled = _submit(world, 6), _submit(world, 300)
    for job in (done, cancelled):
        _drive(job, as_chart, {JobState.RUNNING})
    set_client(as_chart["web"])  # the page's log read runs as the web
    assert "found 4 x NVIDIA GeForce RTX 5090" in b"".join(log_lines(done, follow=False)).decode()
    set_client(None)
    job_services.job_cancel(actor=world.owner, job=cancelled)
    job_reconcile(job_id=cancelled.pk, client=as_chart["worker"])
    worker = as_chart["worker"]
    wait_for(
        lambda: worker.get(paths.job(cancelled.namespace, cancelled.k8s_name)) is None, 30, "Job deleted"
    )
    assert _drive(done, as_chart, {JobState.SUCCEEDED, JobState.FAILED}).state == JobState.SUCCEEDED
    assert "step 3/3 done" in done.log_tail


def test_a_sharing_change_and_a_cordon_under_the_workers_identity(
    world: World, as_chart: dict[str, RealKubeClient], release: Release
) -> None:
    name = "gpu-chart-ids"
    release.kube.kubectl("apply", "-f", "-", stdin=json.dumps(node_manifest(name, GpuNodeSpec())))
    node = gpu_services.node_apply(raw=release.kube.get("node", name))
    shared, _ = make_gpus(node, 2)
    gpu_services.gpu_set_sharing(gpu=shared, mode=SharingMode.SHARED, slices=4, actor=world.admin)
    gpu_services.node_set_cordon(node=node, cordoned=True, actor=world.admin)
    node_sync(node_id=node.pk, client=as_chart["worker"])
    config_map: dict[str, Any] = release.kube.get(
        "configmap", "gpu-portal-sharing", "-n", release.node_namespace
    )
    assert json.loads(config_map["data"]["sharing.json"])["gpus"][shared.uuid] == {
        "mode": "shared",
        "slices": 4,
    }
    assert release.kube.get("node", name)["spec"]["unschedulable"] is True
    release.kube.kubectl("delete", "node", name)
