"""Running the real `helm` and `kubectl` (built into the versioned cache) against the chart."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deploy.localcluster import bin_dir

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "gpu-portal"
JSON = dict[str, Any]


def tool(name: str) -> str:
    path = bin_dir() / name
    assert path.is_file(), f"{path} is missing: run `make cluster-build` (it builds helm too)"
    return str(path)


@dataclass
class Kube:
    """helm and kubectl for one kubeconfig."""

    kubeconfig: Path

    def run(self, name: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
        out = subprocess.run(
            [tool(name), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
            env={"KUBECONFIG": str(self.kubeconfig), "HOME": "/tmp", "PATH": "/usr/bin:/bin"},
        )
        if check and out.returncode != 0:
            raise AssertionError(f"{name} {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
        return out.stdout if check else out.stdout + out.stderr

    def helm(self, *args: str, check: bool = True) -> str:
        return self.run("helm", *args, check=check)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return self.run("kubectl", *args, stdin=stdin, check=check)

    def get(self, *args: str) -> JSON:
        result: JSON = json.loads(self.kubectl("get", *args, "-o", "json"))
        return result


def value_args(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def render(kube: Kube | None, release: str, namespace: str, values: dict[str, str]) -> list[JSON]:
    """`helm template` as parsed documents (no cluster needed when kube is None)."""
    args = ["template", release, str(CHART), "-n", namespace, *value_args(values)]
    text = kube.helm(*args) if kube else run_offline("helm", *args)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def run_offline(name: str, *args: str, check: bool = True) -> str:
    env = {"HOME": "/tmp", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([tool(name), *args], capture_output=True, text=True, timeout=120, env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout if check else out.stdout + out.stderr


def of_kind(docs: Sequence[JSON], kind: str) -> list[JSON]:
    return [d for d in docs if d["kind"] == kind]


def pod_specs(docs: Sequence[JSON]) -> dict[str, JSON]:
    """Every pod template of the rendered chart, by the name of its owner."""
    owners = ("Deployment", "StatefulSet", "DaemonSet", "Job")
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] in owners}


def dump(docs: Sequence[JSON]) -> str:
    return yaml.safe_dump_all(docs)
