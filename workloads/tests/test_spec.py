from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from workloads.spec import EnvVar, SpecLimits, VolumeMount, parse_spec, spec_request

MAXIMA = {
    "gpus": 8,
    "mps_slices": 8,
    "cpu_millicores": 16000,
    "memory_mib": 65536,
    "max_runtime_minutes": 600,
}
LIMITS = SpecLimits(
    images=frozenset({("registry.example.com", "team/train")}),
    volumes={"data": False, "ro": True},
    maxima=MAXIMA,
)
IMAGE = "registry.example.com/team/train:1.0"


def errors_of(data: Any, limits: SpecLimits = LIMITS) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        parse_spec(data, limits)
    return info.value.message_dict


def test_it_accepts_a_typed_request() -> None:
    spec = parse_spec(
        {
            "image": IMAGE,
            "command": ["python"],
            "args": ["train.py"],
            "env": {"EPOCHS": "3"},
            "gpus": 2,
            "gpu_type": "NVIDIA-GeForce-RTX-5090",
            "volumes": [{"volume": "ro", "mount_path": "/data"}],
        },
        LIMITS,
    )
    assert spec.gpus == 2
    assert spec.env == [EnvVar(name="EPOCHS", value="3")]
    assert spec.volumes == [VolumeMount(volume="ro", mount_path="/data", read_only=True)]


@pytest.mark.parametrize("gpus", [-1, 0.5, 10**6, "4", True, None, 9])
def test_it_rejects_bad_gpu_counts(gpus: Any) -> None:
    assert "gpus" in errors_of({"image": IMAGE, "gpus": gpus})


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("KUBERNETES_SERVICE_HOST", "env"),
        ("NVIDIA_VISIBLE_DEVICES", "env"),
        ("CUDA_MPS_PIPE_DIRECTORY", "env"),
        ("GPU_PORTAL_DEVICE_IDS", "env"),
        ("gpu_portal_device_ids", "env"),
        ("1BAD", "env"),
        ("A-B", "env"),
        ("", "env"),
    ],
)
def test_it_rejects_reserved_or_invalid_env_names(name: str, field: str) -> None:
    assert field in errors_of({"image": IMAGE, "env": [{"name": name, "value": "x"}]})


def test_it_rejects_secret_references_in_env() -> None:
    ref = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    assert "env" in errors_of({"image": IMAGE, "env": [ref]})


def test_it_rejects_unknown_fields_and_names_each() -> None:
    errors = errors_of({"image": IMAGE, "privileged": True, "nodeName": "n1"})
    assert set(errors) == {"privileged", "nodeName"}


def test_it_rejects_both_gpus_and_slices() -> None:
    assert "mps_slices" in errors_of({"image": IMAGE, "gpus": 1, "mps_slices": 2})


def test_it_rejects_foreign_volumes_and_bad_paths() -> None:
    assert "volumes" in errors_of({"image": IMAGE, "volumes": [{"volume": "other", "mount_path": "/x"}]})
    assert "volumes" in errors_of({"image": IMAGE, "volumes": [{"volume": "data", "mount_path": "/etc/x"}]})
    assert "volumes" in errors_of({"image": IMAGE, "volumes": [{"volume": "data", "mount_path": "/a/../b"}]})


@pytest.mark.parametrize(
    "path", ["/./etc", "//etc", "/.", "//", "/etc/.", "/./proc/x", "//usr//lib", "/run/"]
)
def test_it_normalises_mount_paths_before_the_deny_check(path: str) -> None:
    errors = errors_of({"image": IMAGE, "volumes": [{"volume": "data", "mount_path": path}]})
    assert "cannot mount over" in " ".join(errors["volumes"])


def test_it_stores_the_normal_mount_path_and_sees_duplicates_through_spelling() -> None:
    spec = parse_spec({"image": IMAGE, "volumes": [{"volume": "data", "mount_path": "/./data//in/"}]}, LIMITS)
    assert spec.volumes[0].mount_path == "/data/in"
    twice = [{"volume": "data", "mount_path": "/data"}, {"volume": "ro", "mount_path": "/data/"}]
    assert "Each mount path may be used once." in errors_of({"image": IMAGE, "volumes": twice})["volumes"]


def test_it_refuses_simulation_when_switched_off() -> None:
    assert "simulate" in errors_of({"image": IMAGE, "simulate": {"run_seconds": 1}})


def test_it_caps_runtime_at_the_quota() -> None:
    assert "max_runtime_minutes" in errors_of({"image": IMAGE, "max_runtime_minutes": 601})


def test_it_refuses_non_objects() -> None:
    assert "non_field_errors" in errors_of(["image"])


def test_a_read_only_volume_asked_read_write_is_refused_not_quietly_changed() -> None:
    asked = {"image": IMAGE, "volumes": [{"volume": "ro", "mount_path": "/data", "read_only": False}]}
    assert errors_of(asked)["volumes"] == ["ro is read-only in this project: mount it with read_only true."]


def test_the_real_node_placement_only_where_the_site_has_one() -> None:
    assert "no real test node" in errors_of({"image": IMAGE, "placement": "real-node"})["placement"][0]
    assert "Leave it out" in errors_of({"image": IMAGE, "placement": "gpu-node-3"})["placement"][0]
    allowed = dataclasses.replace(LIMITS, real_node=True)
    assert parse_spec({"image": IMAGE, "placement": "real-node"}, allowed).placement == "real-node"
    assert "placement" not in spec_request(parse_spec({"image": IMAGE}, allowed))
