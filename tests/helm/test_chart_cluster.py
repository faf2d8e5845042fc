"""The chart on the real local control plane: every rendered object accepted by the API server
(server-side dry run, admission policy included), then install, `helm test`, upgrade and uninstall.
The identities' least privilege is checked on this same release in test_chart_rbac.py,
then test_chart_upgrade.py upgrades and uninstalls it (files run in that order)."""

from __future__ import annotations

import pytest

from tests.helm.chart import CHART, Kube, dump, render
from tests.helm.release import RELEASE, Release
from tests.helm.test_chart_static import VALUE_SETS

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_api_server_accepts_every_object_of_each_value_set(kube: Kube, name: str) -> None:
    namespace, node_ns = f"chart-dry-{name}", f"chart-dry-{name}-node"
    for ns in (namespace, node_ns):
        kube.kubectl("create", "namespace", ns)
    values = {**VALUE_SETS[name], "node.namespace": node_ns, "fullnameOverride": f"dry-{name}"}
    docs = render(kube, "gp", namespace, values)
    out = kube.kubectl("apply", "--dry-run=server", "-f", "-", stdin=dump(docs))
    assert out.count("(server dry run)") == len(docs), out
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/dry-" in out


def test_bad_values_fail_with_the_schema_message_and_create_nothing(kube: Kube) -> None:
    out = kube.helm(
        "install",
        "bad",
        str(CHART),
        "-n",
        "chart-bad",
        "--create-namespace",
        "--set",
        "web.replicas=two",
        "--set",
        "ingress.hots=x",
        check=False,
    )
    assert "at '/web/replicas': got string, want integer" in out
    assert "additional properties 'hots' not allowed" in out
    assert "bad" not in kube.helm("list", "-A", "-q").split()
    assert "NotFound" in kube.kubectl("get", "namespace", "chart-bad", check=False)
    assert (
        kube.kubectl(
            "get", "all,secrets,clusterroles", "-A", "-l", "app.kubernetes.io/instance=bad", "-o", "name"
        )
        == ""
    )


def test_install_runs_migrations_and_every_deployment_becomes_available(release: Release) -> None:
    assert release.install_seconds > 0
    print(f"\nhelm install on the local cluster: {release.install_seconds:.1f} s")
    status = release.kube.helm("status", RELEASE, "-n", release.namespace, "-o", "json")
    assert '"status":"deployed"' in status.replace(" ", "")
    for deployment in ("web", "worker", "beat", "controller", "provisioner"):
        release.kube.kubectl(
            "rollout",
            "status",
            f"deployment/{RELEASE}-{deployment}",
            "-n",
            release.namespace,
            "--timeout=180s",
        )
    node = release.kube.get("daemonset", f"{RELEASE}-node", "-n", release.node_namespace)
    assert node["status"]["desiredNumberScheduled"] >= 1  # the kwok GPU nodes carry nvidia.com/gpu.present


def test_helm_test_runs_its_hook(release: Release) -> None:
    out = release.kube.helm("test", RELEASE, "-n", release.namespace, "--timeout", "180s")
    assert f"TEST SUITE:     {RELEASE}-test-readyz" in out
    assert "Phase:          Succeeded" in out
