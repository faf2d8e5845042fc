"""The examples' CNI manifest checksums are the real ones, not placeholders.

Flannel's release manifest is `Documentation/kube-flannel.yml` at the release tag, and the Go module
proxy serves that tag's files byte for byte (module zips keep file contents), so the checksum of the
URL the examples pin can be computed here without reaching raw.githubusercontent.com.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cluster_setup.ansible import EXAMPLES, sitefile

RAW = re.compile(
    r"^https://raw\.githubusercontent\.com/flannel-io/flannel/(v[0-9.]+)/(Documentation/kube-flannel\.yml)$"
)


def _module_file(version: str, path: str) -> bytes:
    got = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/flannel-io/flannel@{version}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert got.returncode == 0, got.stdout + got.stderr
    return (Path(json.loads(got.stdout)["Dir"]) / path).read_bytes()


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_each_example_pins_the_real_checksum_of_its_manifest(example: Path) -> None:
    cni = sitefile.load(example).data["network"]["cni"]
    match = RAW.match(cni["manifest_url"])
    assert match, (
        f"{example.name}: pin a flannel release manifest this test can check, not {cni['manifest_url']}"
    )
    version, path = match.groups()
    assert version == cni["version"]
    manifest = _module_file(version, path)
    assert f"ghcr.io/flannel-io/flannel:{version}".encode() in manifest, "the release's own images"
    assert hashlib.sha256(manifest).hexdigest() == cni["manifest_sha256"]
