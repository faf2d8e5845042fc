"""The images a chart install on the real node needs, loaded into its containerd (never pulled)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from deploy.localcluster.paths import DEPLOY_DIR
from deploy.localcluster.realnode import RealNode

BUILT = Path.home() / ".cache" / "gpuportal" / "images" / "images.json"
STORE_IMAGES_SCRIPT = DEPLOY_DIR / "realnode" / "store-images.sh"
# The stand-ins for the chart's Docker Hub data stores (store-images.sh).
POSTGRES_IMAGE = "gpuportal.local/postgres:15"
REDIS_IMAGE = "gpuportal.local/redis:7"


def load_built_image(node: RealNode, name: str) -> str:
    """Image `name` of `make images` (portal, node), as a docker archive named as the chart names
    it, into containerd; returns its reference."""
    built = json.loads(BUILT.read_text())[name] if BUILT.exists() else None
    assert built, f"{BUILT} is missing: run `make images` (make pytest-realnode does)"
    archive = node.dirs.root / f"{name}-image.tar"
    ref = f"docker.io/{built['ref']}"
    # skopeo will not write into an existing archive (one an interrupted run left).
    archive.unlink(missing_ok=True)
    try:
        copy = ["skopeo", "copy", "-q", f"oci-archive:{built['archive']}", f"docker-archive:{archive}:{ref}"]
        out = subprocess.run(copy, capture_output=True, text=True, check=False)
        assert out.returncode == 0, f"skopeo copy of the {name} image failed: {out.stderr.strip()}"
        node.import_image(archive)
    finally:
        archive.unlink(missing_ok=True)
    return ref


def load_store_images(node: RealNode) -> None:
    out = subprocess.run(["bash", str(STORE_IMAGES_SCRIPT)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"the store images: {out.stderr.strip()[-2000:]}"
    for archive in sorted(Path(out.stdout.strip().splitlines()[-1]).glob("*.tar")):
        node.import_image(archive)
