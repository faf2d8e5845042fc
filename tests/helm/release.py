"""One install of the chart on the local cluster, shared by the files of tests/helm in order."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field

from tests.helm.chart import CHART, Kube, value_args

RELEASE = "gpt"  # fullname "gpt-gpu-portal" would be long; the release name contains no "gpu-portal"
NAMESPACE = "gpt-portal"
NODE_NAMESPACE = "gpt-node"  # the local cluster already has gpu-portal-system
# Secrets marked helm.sh/resource-policy=keep and the StatefulSets' claims (chart README, "Uninstall").
KEPT = ["secret/{r}-postgresql", "secret/{r}-redis", "secret/{r}-secret-key"]
KEPT_CLAIMS = ["persistentvolumeclaim/data-{r}-postgresql-0", "persistentvolumeclaim/data-{r}-redis-0"]


def kept_after_uninstall() -> list[str]:
    return sorted(name.format(r=RELEASE) for name in KEPT + KEPT_CLAIMS)


@dataclass
class Release:
    kube: Kube
    namespace: str = NAMESPACE
    node_namespace: str = NODE_NAMESPACE
    values: dict[str, str] = field(default_factory=dict)
    install_seconds: float = 0.0
    removed: bool = False

    def install(self) -> None:
        self.values = {"fullnameOverride": RELEASE, "node.namespace": self.node_namespace}
        started = time.monotonic()
        self.kube.helm(
            "install",
            RELEASE,
            str(CHART),
            "-n",
            self.namespace,
            "--create-namespace",
            *value_args(self.values),
            "--timeout",
            "300s",
        )
        self.install_seconds = time.monotonic() - started

    def secret(self, name: str, key: str) -> str:
        data = self.kube.get("secret", name, "-n", self.namespace)["data"]
        return base64.b64decode(data[key]).decode()

    def snapshot(self) -> dict[str, str]:
        """What must survive an upgrade: the generated secrets and the data volumes' identities."""
        values = {
            "secret-key": self.secret(f"{RELEASE}-secret-key", "secret-key"),
            "postgres": self.secret(f"{RELEASE}-postgresql", "password"),
            "redis": self.secret(f"{RELEASE}-redis", "password"),
        }
        for claim in KEPT_CLAIMS:
            name = claim.format(r=RELEASE).split("/")[1]
            values[name] = self.kube.get("pvc", name, "-n", self.namespace)["metadata"]["uid"]
        return values

    def uninstall(self) -> None:
        if not self.removed:
            self.kube.helm("uninstall", RELEASE, "-n", self.namespace, "--wait", "--timeout", "300s")
            self.removed = True
