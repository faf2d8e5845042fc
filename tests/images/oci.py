"""The images `make images` built (deploy/images/build.sh), read from their OCI layout and run with crun.

Nothing here builds: a missing image, tool or root fails the test (pytest.fail), it never skips.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CACHE = Path(os.environ.get("GPUPORTAL_IMAGE_CACHE", Path.home() / ".cache" / "gpuportal" / "images"))
# The hybrid cgroup layout of the test VMs puts a controller (hugetlb) on the cgroup2 hierarchy, which
# crun refuses. These checks need no cgroup limits, so crun runs with cgroups off, in a private mount
# namespace that hides the unified hierarchy from it (the host's mounts are untouched).
UNIFIED = Path("/sys/fs/cgroup/unified")
_ids = itertools.count()


def need(condition: bool, what: str) -> None:
    if not condition:
        pytest.fail(f"{what} (run `make images` as root first)", pytrace=False)


def built() -> dict[str, dict[str, Any]]:
    """deploy/images/build.sh's record of what it built: layout, tag, archive, revision per image."""
    path = CACHE / "images.json"
    need(path.is_file(), f"no {path}")
    record: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return record


def _blob(layout: Path, digest: str) -> dict[str, Any]:
    algorithm, hexdigest = digest.split(":", 1)
    blob: dict[str, Any] = json.loads((layout / "blobs" / algorithm / hexdigest).read_text())
    return blob


def manifest(image: dict[str, Any]) -> dict[str, Any]:
    layout = Path(image["layout"])
    for entry in json.loads((layout / "index.json").read_text())["manifests"]:
        if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == image["tag"]:
            return _blob(layout, entry["digest"])
    pytest.fail(f"tag {image['tag']} is not in {layout}", pytrace=False)


def image_config(image: dict[str, Any]) -> dict[str, Any]:
    return _blob(Path(image["layout"]), manifest(image)["config"]["digest"])


@dataclass
class Bundle:
    """An OCI runtime bundle: the image's root filesystem and the config umoci derives from the image."""

    path: Path

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs"

    def default_config(self) -> dict[str, Any]:
        config: dict[str, Any] = json.loads((self.path / "config.default.json").read_text())
        return config


def unpack(image: dict[str, Any], dest: Path) -> Bundle:
    need(os.geteuid() == 0, "unpacking and running the images needs root")
    ref = f"{image['layout']}:{image['tag']}"
    # `raw unpack` skips the mtree manifest `umoci unpack` writes for repacking: 9 s instead of 30.
    subprocess.run(
        ["umoci", "raw", "unpack", "--image", ref, str(dest / "rootfs")], check=True, capture_output=True
    )
    subprocess.run(
        [
            "umoci",
            "raw",
            "runtime-config",
            "--image",
            ref,
            "--rootfs",
            str(dest / "rootfs"),
            str(dest / "config.default.json"),
        ],
        check=True,
    )
    return Bundle(dest)


def _config(bundle: Bundle, args: list[str], env: dict[str, str], port_on_host: bool) -> dict[str, Any]:
    config = bundle.default_config()
    process = config["process"]
    process["terminal"] = False
    process["args"] = args
    process["env"] += [f"{key}={value}" for key, value in env.items()]
    linux = config["linux"]
    linux.pop("resources", None)  # limits need cgroups, which are off (see UNIFIED)
    config["mounts"] = [m for m in config["mounts"] if m["destination"] != "/sys/fs/cgroup"]
    if port_on_host:  # the host's network namespace, so the test reaches the server on loopback
        linux["namespaces"] = [ns for ns in linux["namespaces"] if ns["type"] != "network"]
    # Like the chart: a read-only root and a writable /tmp.
    config["root"]["readonly"] = True
    config["mounts"].append(
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777"],
        }
    )
    return config


def crun_argv(container_id: str, bundle: Bundle) -> list[str]:
    run = ["crun", "--cgroup-manager=disabled", "run", "--bundle", str(bundle.path), container_id]
    if (UNIFIED / "cgroup.controllers").is_file() and (UNIFIED / "cgroup.controllers").read_text().strip():
        script = f'umount "{UNIFIED}" && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *run]
    return run


def prepare(bundle: Bundle, args: list[str], env: dict[str, str], port_on_host: bool = False) -> list[str]:
    """Writes the bundle's config.json for one command and returns the argv that runs it."""
    (bundle.path / "config.json").write_text(json.dumps(_config(bundle, args, env, port_on_host)))
    return crun_argv(f"gp-image-test-{os.getpid()}-{next(_ids)}", bundle)


def run(
    bundle: Bundle, args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs one command in the container as the image's default user; stdout and stderr together."""
    argv = prepare(bundle, args, env or {})
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def stop(container_id: str) -> None:
    subprocess.run(["crun", "kill", container_id, "KILL"], capture_output=True)
    subprocess.run(["crun", "delete", "--force", container_id], capture_output=True)
