from __future__ import annotations

import pytest

from workloads.images import image_allowed, parse_image

RULES = frozenset({("registry.example.com", "team/train")})
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/team/train",
        "registry.example.com/team/train:1.0",
        f"registry.example.com/team/train@{DIGEST}",
        f"registry.example.com/team/train:1.0@{DIGEST}",
    ],
)
def test_it_allows_exact_registry_and_repository(image: str) -> None:
    ref = parse_image(image)
    assert ref is not None
    assert image_allowed(ref, RULES)


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/team/train-evil",
        "registry.example.com/team/train/sub",
        "registry.example.com.evil.io/team/train",
        "registry.example.com:443/team/train",
        "evil.io/registry.example.com/team/train",
        "registry.example.com/team",
        "registry.example.com/other/train",
    ],
)
def test_it_refuses_prefix_and_lookalike_tricks(image: str) -> None:
    ref = parse_image(image)
    assert ref is None or not image_allowed(ref, RULES)


@pytest.mark.parametrize(
    "image",
    [
        "team/train:1",
        "train",
        "registry.example.com/team/train@sha256:abc",
        "REGISTRY.example.com/team/train",
        "registry.example.com/team/../train",
        "user:pw@registry.example.com/team/train",
        " registry.example.com/team/train",
        "registry.example.com/team/train:1.0\n",
        "registry.example.com//team/train",
        "registry.example.com/Team/Train",
    ],
)
def test_it_refuses_malformed_references(image: str) -> None:
    assert parse_image(image) is None
