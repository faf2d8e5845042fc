"""The chart release the real-node chart tests install, and what they do with it: its values, its
database, the operator's first look when something fails, the researcher's sign-in and jobs."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from deploy.localcluster.realnode import RealNode
from deploy.localcluster.realnode import config as rc
from tests.cluster.helpers import wait_for
from tests.helm.chart import Kube, tool
from tests.realnode.images import POSTGRES_IMAGE, REDIS_IMAGE

NODE = "gpu-real-chart"
RELEASE = "rn"
NAMESPACE = "rn-portal"
NODE_NAMESPACE = "rn-node"
FORWARD_PORT = 18080  # inside the run's own network namespace
PORTAL_URL = f"http://localhost:{FORWARD_PORT}"
EMAIL = "researcher@example.org"
# Requests small enough for the whole portal on a 2-core node; limits stay the chart's.
SMALL = {"requests": {"cpu": "10m", "memory": "64Mi"}}
PSQL = ["psql", "-U", "portal", "-d", "portal", "-h", "/var/run/postgresql", "-tAq", "-v", f"node={NODE}"]
NODE_GPUS = "gpu_gpu g join gpu_node n on n.id = g.node_id where n.name = :'node'"


@dataclass
class Installed:
    node: RealNode
    kube: Kube
    core: client.CoreV1Api
    install_seconds: float
    values: Path
    migrate_exits: list[int] = field(default_factory=list)

    def psql(self, query: str) -> str:
        """A query in the installed Postgres, on its pod's socket; :'node' is this test's node."""
        argv = ["exec", "-i", "-n", NAMESPACE, f"{RELEASE}-postgresql-0", "--", *PSQL]
        return self.kube.kubectl(*argv, stdin=query).strip()

    def pods(self, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.core.list_namespaced_pod(namespace).items]


def chart_values(node: RealNode, portal_ref: str, node_ref: str) -> dict[str, Any]:
    """The values an operator of this cluster would write: its images, its node, its host name."""
    on_real_node = {
        "nodeSelector": {rc.REAL_NODE_LABEL: "true"},
        "tolerations": [{"key": rc.REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
    }
    return {
        "fullnameOverride": RELEASE,
        "image": {
            "repository": "gpu-portal/portal",
            "tag": portal_ref.rsplit(":", 1)[1],
            "pullPolicy": "Never",
        },
        **on_real_node,
        # The browser comes through `kubectl port-forward` on localhost, standing in for the
        # Ingress that would terminate TLS and say so in X-Forwarded-Proto (the browser sends it).
        "portal": {
            "allowedHosts": ["localhost"],
            "csrfTrustedOrigins": [PORTAL_URL],
            "extraEnv": [{"name": "GPUPORTAL_REAL_NODE_PLACEMENT", "value": "1"}],
        },
        "web": {"replicas": 1, "resources": SMALL},
        "worker": {"concurrency": 2, "resources": SMALL},
        "beat": {"resources": SMALL},
        "controller": {"replicas": 1, "resources": SMALL},
        "provisioner": {"resources": SMALL},
        "migrations": {"resources": SMALL},
        "postgresql": {"image": POSTGRES_IMAGE, "resources": SMALL},
        "redis": {"image": REDIS_IMAGE, "resources": SMALL},
        "node": {
            "namespace": NODE_NAMESPACE,
            "backend": "sim",
            "kubeletRootDir": str(node.dirs.kubelet_root),
            "image": {
                "repository": "gpu-portal/node",
                "tag": node_ref.rsplit(":", 1)[1],
                "pullPolicy": "Never",
            },
            # null drops the chart's GPU-label selector (helm merges maps).
            "nodeSelector": {"nvidia.com/gpu.present": None, rc.REAL_NODE_LABEL: "true"},
            "tolerations": on_real_node["tolerations"],
        },
    }


def diagnose(kube: Kube) -> str:
    """What an operator would look at first: pods, recent events, each pod's last log lines."""
    pods = kube.kubectl("get", "pods", "-A", "-o", "wide", check=False)
    events = kube.kubectl("get", "events", "-A", "--sort-by=.lastTimestamp", check=False)
    logs = []
    for namespace in (NAMESPACE, NODE_NAMESPACE):
        names = kube.kubectl("get", "pods", "-n", namespace, "-o", "name", check=False).split()
        for name in names:
            tail = kube.kubectl("logs", "-n", namespace, name, "--all-containers", "--tail=12", check=False)
            logs.append(f"--- {name}\n{tail[-1500:]}")
    return f"{pods[-3000:]}\n{events[-3000:]}\n" + "\n".join(logs)


def wait(kube: Kube, probe: Callable[[], Any], timeout: float, what: str) -> Any:
    try:
        return wait_for(probe, timeout, what)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{diagnose(kube)}") from exc


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"]["conditions"] or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def component(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"].get("app.kubernetes.io/component", ""))


SEED = """
import os
from allauth.account.models import EmailAddress
from accounts.choices import Role
from accounts.models import Membership, Project, Quota, User
from workloads.models import ImageRule
email = os.environ["SEED_EMAIL"]
user, _ = User.objects.get_or_create(email=email, defaults={"username": email.split("@")[0]})
user.set_password(os.environ["SEED_PASSWORD"])
user.save()
EmailAddress.objects.update_or_create(user=user, email=email, defaults={"verified": True, "primary": True})
project, _ = Project.objects.get_or_create(slug="real-lab", defaults={"name": "Real lab"})
Quota.objects.update_or_create(project=project, defaults={"gpus": 4, "mps_slices": 0})
Membership.objects.get_or_create(project=project, user=user, defaults={"role": Role.MANAGER})
ImageRule.objects.get_or_create(project=project, registry="gpuportal.local", repository="busybox")
other, _ = Project.objects.get_or_create(slug="other-lab", defaults={"name": "Other lab"})
Quota.objects.update_or_create(project=other, defaults={"gpus": 1, "mps_slices": 0})
Membership.objects.get_or_create(project=other, user=user, defaults={"role": Role.MANAGER})
ImageRule.objects.get_or_create(project=other, registry="gpuportal.local", repository="busybox")
"""


@contextlib.contextmanager
def port_forward(kube: Kube) -> Iterator[None]:
    """`kubectl port-forward` to the web Service, through the real kubelet and containerd."""
    argv = [tool("kubectl"), "port-forward", "-n", NAMESPACE, f"svc/{RELEASE}-web", f"{FORWARD_PORT}:80"]
    env = {"KUBECONFIG": str(kube.kubeconfig), "HOME": "/tmp", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("Forwarding from"), first + proc.stdout.read()
        yield
    finally:
        proc.terminate()
        proc.wait(10)


def submit(http: httpx.Client, script: str, project: str = "real-lab") -> str:
    """A one-GPU busybox job on the real node through the API; its API path."""
    spec = {"image": "gpuportal.local/busybox:1", "command": ["sh", "-c", script], "gpus": 1}
    spec |= {"cpu_millicores": 100, "memory_mib": 64, "placement": "real-node"}
    created = http.post("/api/v1/jobs/", json={"project": project, **spec})
    assert created.status_code == 201, created.text
    return f"/api/v1/jobs/{created.json()['id']}/"


def log_evidence(installed: Installed, http: httpx.Client, path: str) -> str:
    """What the portal says of the job's log, by the API (read and followed) and in its row, and
    what the web logged besides the probes and the agents' samples."""
    answer = http.get(f"{path}logs/")
    followed = http.get(f"{path}logs/?follow=1")
    row = installed.psql("select state, pod_name, log_captured, length(log_tail) from workloads_job")
    web = installed.kube.kubectl("logs", "-n", NAMESPACE, f"deploy/{RELEASE}-web", "--tail=3000", check=False)
    noise = ("/ingest/samples", "/healthz", "/readyz")
    kept = [line for line in web.splitlines() if not any(n in line for n in noise)]
    return (
        f"API {answer.status_code}: {answer.text[:300]!r}\nfollowed {followed.status_code}: "
        f"{followed.text[:300]!r}\njob rows: {row}\n" + "\n".join(kept[-80:])
    )


def api(installed: Installed, password: str) -> httpx.Client:
    """The REST API as gpuctl calls it, through the web Service's ClusterIP (kube-proxy), with the
    header the Ingress would add; signed in with a token of the researcher's."""
    service = installed.core.read_namespaced_service(f"{RELEASE}-web", NAMESPACE).to_dict()
    headers = {"Host": "localhost", "X-Forwarded-Proto": "https"}
    http = httpx.Client(base_url=f"http://{service['spec']['cluster_ip']}", headers=headers, timeout=10)
    body = {"email": EMAIL, "password": password, "name": "upgrade", "scopes": ["read", "submit"], "otp": ""}
    # Right after the web was away (the Postgres test), kube-proxy may not route to it yet.
    wait(installed.kube, lambda: answers(http), 60, "the web Service to answer")
    token = http.post("/api/v1/auth/token/", json=body)
    assert token.status_code == 201, token.text
    http.headers["Authorization"] = f"Bearer {token.json()['secret']}"
    return http


def answers(http: httpx.Client) -> bool:
    try:
        return http.get("/readyz").status_code == 200
    except httpx.HTTPError:
        return False
