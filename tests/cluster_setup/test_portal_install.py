"""The last step: the chart values rendered from the site file (sitefile.portal_values), installed with
`helm install` of deploy/helm/gpu-portal onto the local cluster, as playbooks/portal.yml does on a real
one. The local cluster already has gpu-portal-system, so the site's node_namespace is another."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.cluster_setup.ansible import EXAMPLES, sitefile
from tests.helm.chart import CHART, Kube

pytestmark = pytest.mark.cluster

RELEASE, NAMESPACE, NODE_NAMESPACE = "site", "site-portal", "site-node"


def test_the_site_values_install_onto_the_cluster(
    kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> None:
    site = sitefile.load(EXAMPLES / "lab-1cp-3gpu.yaml")
    site.data["portal"].update(namespace=NAMESPACE, release=RELEASE, node_namespace=NODE_NAMESPACE)
    values = sitefile.portal_values(site)
    values["fullnameOverride"] = RELEASE
    path = tmp_path_factory.mktemp("site") / "portal-values.yaml"
    path.write_text(yaml.safe_dump(values))
    kube.helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NAMESPACE,
        "--create-namespace",
        "-f",
        str(path),
        "--timeout",
        "300s",
    )
    try:
        got = json.loads(kube.helm("get", "values", RELEASE, "-n", NAMESPACE, "-o", "json"))
        assert got["portal"]["allowedHosts"] == ["portal.lab.example"]
        web = kube.get("deployment", f"{RELEASE}-web", "-n", NAMESPACE)
        image = web["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image.startswith("harbor.lab.example:30003/gpu-portal/gpu-portal/portal:")
        assert web["spec"]["replicas"] == 2
        ingress = kube.get("ingress", "-n", NAMESPACE)["items"]
        assert [i["spec"]["rules"][0]["host"] for i in ingress] == ["portal.lab.example"]
        assert ingress[0]["spec"]["ingressClassName"] == "nginx"
        claims = kube.get("pvc", "-n", NAMESPACE)["items"]
        assert claims, "the bundled Postgres and Redis claim volumes"
        assert {c["spec"]["storageClassName"] for c in claims} == {"nfs"}
        daemonsets = kube.get("daemonset", "-n", NODE_NAMESPACE)["items"]
        assert daemonsets, "the node DaemonSet lands in the site's node namespace"
        node_image = daemonsets[0]["spec"]["template"]["spec"]["containers"][0]["image"]
        assert node_image.startswith("harbor.lab.example:30003/gpu-portal/gpu-portal/node:")
        assert daemonsets[0]["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    finally:
        kube.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "300s")
