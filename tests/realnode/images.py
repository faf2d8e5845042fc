"""The images a chart install on the real node needs, loaded into its containerd (never pulled)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from deploy.localcluster.paths import DEPLOY_DIR
from deploy.localcluster.realnode import RealNode

BUILT = Path.home() / ".cache" / "gpuportal" / "images" / "images.json"
STORE_IMAGES_SCRIPT = DEPLOY_DIR / "realnode" / "store-images.sh"
# The stand-ins for the chart's Docker Hub data stores (store-images.sh).
POSTGRES_IMAGE = "gpuportal.local/postgres:15"
REDIS_IMAGE = "gpuportal.local/redis:7"
TRAIN_IMAGE = "gpuportal.local/train:1"  # python3-torch, for jobs of several workers


def _built(name: str) -> dict[str, str]:
    built: dict[str, str] | None = json.loads(BUILT.read_text())[name] if BUILT.exists() else None
    assert built, f"{BUILT} is missing: run `make images` (make pytest-realnode does)"
    return built


def _run(what: str, argv: list[str]) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"{what} failed: {out.stderr.strip()}"


def _import(node: RealNode, source: str, ref: str, what: str) -> None:
    """An image skopeo reads at `source`, as a docker archive named `ref`, into containerd."""
    archive = node.dirs.root / f"{what}-image.tar"
    # skopeo will not write into an existing archive (one an interrupted run left).
    archive.unlink(missing_ok=True)
    try:
        _run(
            f"skopeo copy of the {what} image",
            ["skopeo", "copy", "-q", source, f"docker-archive:{archive}:{ref}"],
        )
        node.import_image(archive)
    finally:
        archive.unlink(missing_ok=True)


def load_built_image(node: RealNode, name: str) -> str:
    """Image `name` of `make images` (portal, node), named as the chart names it, into containerd;
    returns its reference."""
    built = _built(name)
    ref = f"docker.io/{built['ref']}"
    _import(node, f"oci-archive:{built['archive']}", ref, name)
    return ref


def load_rebuilt_image(node: RealNode, name: str, revision: str) -> str:
    """Image `name` as a rebuild would arrive: the same layers under a new configuration (a revision
    label), so a new image id, under a new tag; returns its reference."""
    built = _built(name)
    layout = node.dirs.root / f"{name}-rebuild"
    shutil.rmtree(layout, ignore_errors=True)
    try:
        _run(
            "skopeo copy to a layout",
            ["skopeo", "copy", "-q", f"oci-archive:{built['archive']}", f"oci:{layout}:built"],
        )
        config = ["umoci", "config", "--image", f"{layout}:built", "--tag", revision]
        _run("umoci config", [*config, "--config.label", f"org.opencontainers.image.revision={revision}"])
        ref = f"docker.io/{built['ref'].rsplit(':', 1)[0]}:{revision}"
        _import(node, f"oci:{layout}:{revision}", ref, f"{name}-{revision}")
    finally:
        shutil.rmtree(layout, ignore_errors=True)
    return ref


def _store_images() -> Path:
    out = subprocess.run(["bash", str(STORE_IMAGES_SCRIPT)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"the store images: {out.stderr.strip()[-2000:]}"
    return Path(out.stdout.strip().splitlines()[-1])


def load_store_images(node: RealNode) -> None:
    built = _store_images()
    for name in ("postgres", "redis"):
        node.import_image(built / f"{name}.tar")


def load_train_image(node: RealNode) -> str:
    """The training image (store-images.sh) into containerd; returns its reference."""
    node.import_image(_store_images() / "train.tar")
    return TRAIN_IMAGE
