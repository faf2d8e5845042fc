"""Image references, parsed strictly, and matched against a project's allow-list exactly.

A reference must name its registry (no implicit docker.io), and a rule matches only when the
registry and the repository are equal as strings: `registry.example.com/ml/train` does not allow
`registry.example.com/ml/train-evil`, `registry.example.com.evil.io/ml/train` or
`registry.example.com:443/ml/train` (DockerSpawner GHSA-hfgr-h3vc-p6c2, Gatekeeper's prefix advice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    r"^(?P<registry>(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::[0-9]{1,5})?)"
    rf"/(?P<repository>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


@dataclass(frozen=True)
class ImageRef:
    registry: str
    repository: str
    tag: str | None
    digest: str | None


def parse_image(text: str) -> ImageRef | None:
    """The parts of a fully qualified reference, or None when it is not one."""
    if len(text) > 300:
        return None
    match = _IMAGE.fullmatch(text)
    if match is None:
        return None
    registry = match["registry"]
    if "." not in registry and ":" not in registry and registry != "localhost":
        return None  # "team/train" would silently mean docker.io
    return ImageRef(registry, match["repository"], match["tag"], match["digest"])


def image_allowed(ref: ImageRef, rules: frozenset[tuple[str, str]]) -> bool:
    return (ref.registry, ref.repository) in rules


def allowed_text(rules: frozenset[tuple[str, str]], most: int = 10) -> str:
    """The allow-list in words, for a refused image's message (the first `most` rules, sorted)."""
    if not rules:
        return "This project allows no images yet; ask an operator to add one."
    names = [f"{registry}/{repository}" for registry, repository in sorted(rules)]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"Allowed: {', '.join(names[:most])}{more} (any tag or digest)."
