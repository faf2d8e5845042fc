"""The site file: the examples pass; each broken one fails with a message naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster_setup.ansible import CLUSTER, EXAMPLES, run, sitefile, tool

GOOD = sorted(EXAMPLES.glob("*.yaml"))
LAB = EXAMPLES / "lab-1cp-3gpu.yaml"
CP = "control-plane"


def lab() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(LAB.read_text())
    return data


def without(path: str) -> dict[str, Any]:
    data = lab()
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    del node[last]
    return data


def setting(path: str, value: Any) -> dict[str, Any]:
    data = lab()
    *parents, last = path.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def more_nodes(*nodes: dict[str, Any]) -> dict[str, Any]:
    data = lab()
    data["nodes"] = [*data["nodes"], *nodes]
    return data


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "no nodes": (without("nodes"), "nodes: missing (required)"),
    "no interface": (without("network.interface"), "network.interface: missing (required)"),
    "no endpoint": (without("cluster.control_plane_endpoint"), "cluster.control_plane_endpoint: missing"),
    "no nfs export": (without("storage.nfs.export"), "storage.nfs.export: missing (required)"),
    "no registry": (without("registry"), "registry: missing (required)"),
    "no kubernetes version": (without("kubernetes.version"), "kubernetes.version: missing (required)"),
    "bad pod cidr": (setting("network.pod_cidr", "10.244.0.0/33"), "network.pod_cidr: '10.244.0.0/33'"),
    "host bits": (setting("network.service_cidr", "10.96.0.1/12"), "service_cidr: '10.96.0.1/12' has"),
    "overlap": (setting("network.service_cidr", "10.244.128.0/17"), "network.service_cidr: overlaps"),
    "bad address": (setting("nodes.1.address", "192.168.110.300"), "nodes[1].address: '192.168.110.300'"),
    "bad role": (setting("nodes.0.roles", ["master"]), "nodes[0].roles[0]: 'master' is not one of"),
    "bad gpus": (setting("nodes.2.gpus", "four"), "nodes[2].gpus: 'four' is not of type 'integer'"),
    "typo": (setting("network.pod_cdir", "10.0.0.0/16"), "network: Additional properties"),
    "bad cni": (setting("network.cni.plugin", "weave"), "network.cni.plugin: 'weave' is not one of"),
    "bad checksum": (setting("network.cni.manifest_sha256", "abc"), "network.cni.manifest_sha256: 'abc'"),
    "http manifest": (setting("network.cni.manifest_url", "http://x/y.yaml"), "network.cni.manifest_url"),
    "bad version": (setting("kubernetes.version", "v1.36"), "kubernetes.version: 'v1.36'"),
    "duplicate name": (setting("nodes.2.name", "gpu1"), "nodes[2].name: 'gpu1' is also nodes[1].name"),
    "dup address": (setting("nodes.3.address", "192.168.110.111"), "nodes[3].address: '192.168.110.111'"),
    "no control plane": (setting("nodes.0.roles", ["worker"]), "nodes: no node has the role control-plane"),
    "two control planes": (
        more_nodes({"name": "cp2", "address": "192.168.110.102", "roles": [CP]}),
        "nodes: 2 control-plane nodes; etcd needs an odd number",
    ),
    "gpu without worker": (setting("nodes.0.gpus", 2), "nodes[0].roles: a node with gpus"),
    "missing ca": (setting("registry.ca_file", "nope.pem"), "registry.ca_file:"),
    "node in pod cidr": (setting("nodes.1.address", "10.244.1.5"), "nodes[1].address: 10.244.1.5 lies"),
    "bad export": (setting("storage.nfs.export", "srv/nfs"), "storage.nfs.export: 'srv/nfs'"),
}


def write(tmp_path: Path, data: Any) -> Path:
    (tmp_path / "registry-ca.pem").write_text((EXAMPLES / "registry-ca.pem").read_text())
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("site", GOOD, ids=[s.stem for s in GOOD])
def test_the_examples_are_valid(site: Path) -> None:
    loaded = sitefile.load(site)
    assert loaded.with_role("control-plane")


@pytest.mark.parametrize("name", BAD)
def test_a_bad_site_file_names_the_field(name: str, tmp_path: Path) -> None:
    data, expected = BAD[name]
    with pytest.raises(sitefile.SiteError) as caught:
        sitefile.load(write(tmp_path, copy.deepcopy(data)))
    assert expected in str(caught.value), str(caught.value)


def test_the_examples_have_the_shapes_the_issue_asks_for() -> None:
    lab_site = sitefile.load(LAB)
    assert len(lab_site.with_role("control-plane")) == 1
    assert [n["gpus"] for n in lab_site.gpu_nodes] == [4, 4, 4]
    assert lab_site.data["gpu"]["product"] == "NVIDIA-GeForce-RTX-5090"
    ha = sitefile.load(EXAMPLES / "ha-3cp.yaml")
    assert len(ha.with_role("control-plane")) == 3


def test_cluster_sh_stops_before_ansible_on_a_bad_site(tmp_path: Path) -> None:
    site = write(tmp_path, without("network.interface"))
    out = run(["bash", str(CLUSTER / "cluster.sh"), str(site), "prepare"], PYTHON=tool("python"))
    assert out.returncode == 1
    assert "network.interface: missing (required)" in out.stderr
    assert "PLAY" not in out.stdout
