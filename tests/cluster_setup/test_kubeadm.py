"""The kubeadm configurations rendered from the site file pass `kubeadm config validate` (kubeadm built
by deploy/localcluster/build.sh), for a 1-control-plane and a 3-control-plane site, every node's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.localcluster import bin_dir
from tests.cluster_setup.ansible import EXAMPLES, PLAYBOOKS, sitefile

SITES = {
    "one-control-plane": EXAMPLES / "lab-1cp-3gpu.yaml",
    "three-control-planes": EXAMPLES / "ha-3cp.yaml",
}
# What join.yml fills in at join time (in /run only): a well-formed token, CA hash and certificate key.
SECRETS = {
    sitefile.JOIN_TOKEN: "abcdef.0123456789abcdef",
    sitefile.CA_CERT_HASH: "sha256:" + "ab" * 32,
    sitefile.CERTIFICATE_KEY: "cd" * 32,
}


def validate(config: Path) -> subprocess.CompletedProcess[str]:
    kubeadm = bin_dir() / "kubeadm"
    if not kubeadm.is_file():
        pytest.fail(f"{kubeadm} is missing: run `make cluster-build` (it builds kubeadm)")
    return subprocess.run(
        [str(kubeadm), "config", "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", SITES)
def test_every_nodes_kubeadm_configuration_validates(name: str, tmp_path: Path) -> None:
    site = sitefile.load(SITES[name])
    configs = sitefile.kubeadm_configs(site)
    assert set(configs) == {n["name"] for n in site.nodes}
    for node, text in configs.items():
        for marker, value in SECRETS.items():
            text = text.replace(marker, value)
        path = tmp_path / f"{node}.yaml"
        path.write_text(text)
        out = validate(path)
        assert out.returncode == 0, f"{node}: {out.stdout}{out.stderr}"
        assert "ok" in out.stdout


def test_the_configurations_carry_the_site_values() -> None:
    site = sitefile.load(SITES["three-control-planes"])
    configs = sitefile.kubeadm_configs(site)
    init, cluster, kubelet = yaml.safe_load_all(configs["cp1"])
    assert init["kind"] == "InitConfiguration"
    assert init["localAPIEndpoint"]["advertiseAddress"] == "10.0.0.11"
    assert cluster["controlPlaneEndpoint"] == "k8s-api.ha.example:6443"
    assert cluster["networking"] == {
        "podSubnet": "10.32.0.0/16",
        "serviceSubnet": "10.33.0.0/16",
        "dnsDomain": "cluster.local",
    }
    assert cluster["kubernetesVersion"] == "v1.36.3"
    assert kubelet["cgroupDriver"] == "systemd"
    cp2 = yaml.safe_load(configs["cp2"])
    assert cp2["controlPlane"]["localAPIEndpoint"]["advertiseAddress"] == "10.0.0.12"
    assert cp2["discovery"]["bootstrapToken"]["token"] == sitefile.JOIN_TOKEN  # no secret in the render
    gpu1 = yaml.safe_load(configs["gpu1"])
    assert "controlPlane" not in gpu1
    assert gpu1["nodeRegistration"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]


def test_kubeadm_validate_rejects_an_unfilled_join_configuration(tmp_path: Path) -> None:
    """The check is real: the render with its markers (no token) is not a valid configuration."""
    path = tmp_path / "gpu1.yaml"
    path.write_text(sitefile.kubeadm_configs(sitefile.load(SITES["one-control-plane"]))["gpu1"])
    out = validate(path)
    assert out.returncode != 0
    assert "token" in (out.stdout + out.stderr).lower()


def test_kubeadm_init_makes_a_token_of_30_minutes_and_ansible_never_prints_it(tmp_path: Path) -> None:
    init, cluster, _ = yaml.safe_load_all(
        sitefile.kubeadm_configs(sitefile.load(SITES["one-control-plane"]))["cp1"]
    )
    old = tmp_path / "init.yaml"
    old.write_text(yaml.safe_dump_all([init, cluster]))
    new = tmp_path / "migrated.yaml"
    kubeadm = bin_dir() / "kubeadm"
    argv = [str(kubeadm), "config", "migrate", "--old-config", str(old), "--new-config", str(new)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    # What kubeadm itself makes of the configuration, defaults filled in.
    (migrated,) = (d for d in yaml.safe_load_all(new.read_text()) if d["kind"] == "InitConfiguration")
    assert [t["ttl"] for t in migrated["bootstrapTokens"]] == ["30m0s"]

    (path,) = (p for p in PLAYBOOKS if p.name == "control-plane.yml")
    playbook = yaml.safe_load(path.read_text())
    tasks = {t["name"]: t for play in playbook for t in play["tasks"]}
    init_task = tasks["Kubeadm init (once)"]
    assert init_task["no_log"] is True
    assert "--upload-certs" not in init_task["ansible.builtin.command"]
    (mode,) = (
        t for t in tasks.values() if t.get("ansible.builtin.file", {}).get("path", "").endswith("admin.conf")
    )
    assert (mode["ansible.builtin.file"]["mode"], mode["delegate_to"]) == ("0600", "localhost")
