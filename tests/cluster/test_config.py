"""The rendered kwokctl config and node manifests, checked without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import deploy.localcluster.netns as netns
from deploy.localcluster.config import render_config
from deploy.localcluster.nodes import GpuNodeSpec, node_manifest


def test_config_names_every_binary_by_absolute_path_and_binds_loopback(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(render_config(bin_dir=tmp_path, pki_dir=tmp_path / "pki")))

    options = docs[0]["options"]
    assert options["runtime"] == "binary"
    assert options["bindAddress"] == "127.0.0.1"
    for key in ("kubeApiserverBinary", "kubeControllerManagerBinary", "kubeSchedulerBinary", "etcdBinary"):
        assert options[key].startswith(f"{tmp_path}/")
    assert options["kwokControllerBinary"] == f"{tmp_path}/kwok"
    (logs,) = (d for d in docs if d["kind"] == "ClusterLogs")
    assert Path(logs["spec"]["logs"][0]["logsFile"]).is_absolute()
    (apiserver,) = (p for p in docs[0]["componentsPatches"] if p["name"] == "kube-apiserver")
    args = {a["key"]: a["value"] for a in apiserver["extraArgs"]}
    assert args["kubelet-client-certificate"] == f"{tmp_path}/pki/admin.crt"
    assert args["kubelet-client-key"] == f"{tmp_path}/pki/admin.key"


def _apiserver_args(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    (apiserver,) = (p for p in docs[0]["componentsPatches"] if p["name"] == "kube-apiserver")
    return [(a["key"], a["value"]) for a in apiserver["extraArgs"]]


def test_inside_the_runs_namespace_the_api_server_is_reachable_from_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubernetes Service's endpoint is the advertised address: the node's, where the server
    also listens; outside the namespace it stays on loopback."""
    outside = list(yaml.safe_load_all(render_config(bin_dir=tmp_path, pki_dir=tmp_path)))
    assert not {"bind-address", "advertise-address"} & {key for key, _ in _apiserver_args(outside)}
    monkeypatch.setattr(netns, "current", lambda: netns.DEFAULT_NAME)
    inside = list(yaml.safe_load_all(render_config(bin_dir=tmp_path, pki_dir=tmp_path)))
    args = _apiserver_args(inside)
    assert args[-2:] == [("bind-address", "0.0.0.0"), ("advertise-address", netns.NODE_IP)]  # noqa: S104
    assert inside[0]["options"]["kubeApiserverCertSANs"] == ["10.0.0.1"]  # the Service's ClusterIP
    assert [d["kind"] for d in inside] == [d["kind"] for d in outside]


def test_config_carries_the_complete_stage_set() -> None:
    docs = list(yaml.safe_load_all(render_config(bin_dir=Path("/bin"), pki_dir=Path("/pki"))))

    stages = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Stage"}
    assert set(stages) == {
        "node-initialize",
        "node-heartbeat-with-lease",
        "pod-ready",
        "pod-complete",
        "pod-fail",
        "pod-delete",
    }
    complete_keys = [e["key"] for e in stages["pod-complete"]["spec"]["selector"]["matchExpressions"]]
    assert '.metadata.annotations["gpuportal.dev/exit-code"]' in complete_keys
    assert stages["pod-complete"]["spec"]["delay"]["durationMilliseconds"] == 5000


def test_gpu_node_advertises_whole_and_shared_gpus() -> None:
    node = node_manifest("gpu-node-0", GpuNodeSpec(slices_per_gpu=4))

    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert node["status"]["capacity"]["nvidia.com/gpu.shared"] == "16"
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "127.0.0.1"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    assert "taints" not in node["spec"]
