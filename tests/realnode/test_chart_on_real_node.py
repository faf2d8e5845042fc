"""The chart installed for real: every portal pod on the real node as a container, from the images
`make images` builds and Debian-built stand-ins for the bundled Postgres and Redis
(deploy/localcluster/realnode/store-images.sh), claims bound to the node's local volumes, names
resolved by the cluster DNS, Services routed by kube-proxy, NetworkPolicies enforced.

Its own node, as test_node_daemonset.py has (the chart's device plugin would clash with the
session's in-process one). The tests run in file order on one release.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from django.db.migrations.loader import MigrationLoader
from kubernetes import client

from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import RealNode, start_real_node
from deploy.localcluster.realnode import config as rc
from tests.cluster.helpers import wait_for
from tests.helm.chart import CHART, Kube, tool
from tests.helm.release import KEPT, KEPT_CLAIMS
from tests.realnode.conftest import require_netns
from tests.realnode.images import POSTGRES_IMAGE, REDIS_IMAGE, load_built_image, load_store_images
from tests.realnode.watchers import ExitWatch, Poller
from workloads.k8s.labels import UID_LABEL

NODE = "gpu-real-chart"
RELEASE = "rn"
NAMESPACE = "rn-portal"
NODE_NAMESPACE = "rn-node"
FORWARD_PORT = 18080  # inside the run's own network namespace
PORTAL_URL = f"http://localhost:{FORWARD_PORT}"
EMAIL = "researcher@example.org"
PORTAL_COMPONENTS = {"web", "worker", "beat", "controller", "provisioner", "postgresql", "redis"}
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


@pytest.fixture(scope="module")
def installed(k8s_cluster: ClusterHandle, kube_api: client.ApiClient) -> Iterator[Installed]:
    require_netns()
    node = start_real_node(k8s_cluster, name=NODE)
    kube = Kube(k8s_cluster.kubeconfig)
    core = client.CoreV1Api(kube_api)
    try:
        portal_ref = load_built_image(node, "portal")
        node_ref = load_built_image(node, "node")
        load_store_images(node)
        values = node.dirs.root / "chart-values.yaml"
        values.write_text(yaml.safe_dump(chart_values(node, portal_ref, node_ref)))
        with ExitWatch(core, NAMESPACE, "migrations") as migrations:
            started = time.monotonic()
            out = kube.helm(
                "install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", "-f", str(values),
                "--wait", "--timeout", "600s", check=False,
            )  # fmt: skip
            seconds = time.monotonic() - started
        if "STATUS: deployed" not in out:
            raise AssertionError(f"helm install failed:\n{out[-3000:]}\n{diagnose(kube)}")
        yield Installed(node, kube, core, seconds, values, list(migrations.exits.values()))
    finally:
        kube.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "300s", check=False)
        kube.kubectl(
            "delete", "namespace", NAMESPACE, NODE_NAMESPACE, "--ignore-not-found", "--wait", check=False
        )
        left = node.stop()
    assert not left, f"the real node left the host changed: {left}"


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


def test_install_migrates_and_runs_every_portal_pod_ready_on_the_real_node(installed: Installed) -> None:
    print(f"\nhelm install on the real node, --wait: {installed.install_seconds:.1f} s")
    # The hook Job's container really ran the migrations, once, and exited 0.
    assert installed.migrate_exits == [0], installed.migrate_exits
    applied = {
        tuple(line.split("|")) for line in installed.psql("select app, name from django_migrations").split()
    }
    assert applied == set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)

    pods = installed.pods()
    assert {component(p) for p in pods} == PORTAL_COMPONENTS
    for pod in pods:
        assert pod["spec"]["node_name"] == NODE, pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running", pod["metadata"]["name"]
        assert ready(pod), pod["metadata"]["name"]
    (agent,) = installed.pods(NODE_NAMESPACE)
    assert agent["spec"]["node_name"] == NODE
    assert ready(agent)
    # The controller reaches the API server through the kubernetes Service: it leads.
    (controller,) = (p["metadata"]["name"] for p in pods if component(p) == "controller")
    holder = ["get", "lease", "gpu-portal-controller", "-n", NAMESPACE]
    holder += ["-o", "jsonpath={.spec.holderIdentity}"]
    leads = lambda: installed.kube.kubectl(*holder, check=False).startswith(controller)  # noqa: E731
    wait(installed.kube, leads, 60, "the controller to hold its Lease")
    claims = [c.to_dict() for c in installed.core.list_namespaced_persistent_volume_claim(NAMESPACE).items]
    assert sorted((c["metadata"]["name"], c["status"]["phase"]) for c in claims) == [
        (f"data-{RELEASE}-postgresql-0", "Bound"),
        (f"data-{RELEASE}-redis-0", "Bound"),
    ]
    _print_memory(installed)


def _print_memory(installed: Installed) -> None:
    """Each pod's working set, as the real kubelet reports it."""
    raw = installed.kube.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/stats/summary")
    for pod in json.loads(raw)["pods"]:
        if pod["podRef"]["namespace"] in (NAMESPACE, NODE_NAMESPACE):
            mib = pod.get("memory", {}).get("workingSetBytes", 0) / 2**20
            print(f"  {pod['podRef']['name']}: {mib:.0f} MiB working set")


def test_helm_test_runs_its_pod_against_the_web_service(installed: Installed) -> None:
    # What an operator runs (the chart's NOTES); helm prints the test pod's log itself.
    out = installed.kube.helm("test", RELEASE, "-n", NAMESPACE, "--timeout", "300s", check=False)
    assert "Phase:          Succeeded" in out, f"{out}\n{diagnose(installed.kube)}"
    assert "ready: {'ok': True" in out, out


def test_the_agents_samples_reach_the_portal(installed: Installed) -> None:
    query = f"select count(*) from gpu_sample s where s.gpu_id in (select g.id from {NODE_GPUS})"  # noqa: S608
    wait(
        installed.kube, lambda: int(installed.psql(query) or 0) > 0, 120, "the agent's samples in the portal"
    )


# What an operator does in `manage.py shell` on the web pod before the admin is set up: a researcher
# with a password, a project with GPUs, and the busybox image allowed there.
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


@pytest.fixture(scope="module")
def password(installed: Installed) -> str:
    """The researcher's, seeded once in the installed portal."""
    secret = secrets.token_urlsafe(12)
    seed = [
        "env",
        f"SEED_EMAIL={EMAIL}",
        f"SEED_PASSWORD={secret}",
        "python",
        "manage.py",
        "shell",
        "-c",
        SEED,
    ]
    installed.kube.kubectl("exec", "-n", NAMESPACE, f"deploy/{RELEASE}-web", "--", *seed)
    return secret


def submit(http: httpx.Client, script: str) -> str:
    """A one-GPU busybox job on the real node through the API (the form offers no placement: the
    real node is the local cluster's); its API path."""
    spec = {"image": "gpuportal.local/busybox:1", "command": ["sh", "-c", script], "gpus": 1}
    spec |= {"cpu_millicores": 100, "memory_mib": 64, "placement": "real-node"}
    created = http.post("/api/v1/jobs/", json={"project": "real-lab", **spec})
    assert created.status_code == 201, created.text
    return f"/api/v1/jobs/{created.json()['id']}/"


def test_a_researcher_signs_in_and_follows_a_real_jobs_log_to_its_end(
    installed: Installed, password: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    http = api(installed, password)
    script = "echo hello from the installed portal; for i in 1 2 3 4 5 6; do echo step $i; sleep 3; done"
    with port_forward(installed.kube), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context(extra_http_headers={"X-Forwarded-Proto": "https"})
        page = context.new_page()
        page.goto(f"{PORTAL_URL}/accounts/login/")
        page.fill("#id_login", EMAIL)
        page.fill("#id_password", password)
        page.locator("form:has(#id_password) button[type=submit]").click()
        page.wait_for_url(lambda url: "/accounts/login/" not in url)

        path = submit(http, script)  # opened at once: the page follows the log as the job runs
        page.goto(f"{PORTAL_URL}{path.removeprefix('/api/v1')}")
        log = page.locator("#job-log")
        try:
            expect(log).to_contain_text("hello from the installed portal", timeout=120_000)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_log_evidence(installed, http, path)}") from exc
        expect(log).to_contain_text("step 6", timeout=60_000)  # followed as the container writes it
        state = page.locator('[data-job] [data-field="state"]')

        def succeeded() -> bool:
            page.reload()
            return state.inner_text().strip() == "Succeeded"

        wait(installed.kube, succeeded, 120, "the job page to say Succeeded")
        expect(log).to_contain_text("step 6")

        # The agent's GPUs on the cluster map.
        uuids = installed.psql(f"select g.uuid from {NODE_GPUS}")  # noqa: S608 (constants)
        page.goto(f"{PORTAL_URL}/cluster/")
        expect(page.locator(f".gpu-tile[data-uuid='{uuids.split()[0]}']")).to_be_visible(timeout=30_000)
        browser.close()
    assert http.get(path).json()["node"] == NODE


def _log_evidence(installed: Installed, http: httpx.Client, path: str) -> str:
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


def test_the_web_goes_unready_without_postgres_and_recovers(installed: Installed) -> None:
    kube = installed.kube
    (web,) = (p["metadata"]["name"] for p in installed.pods() if component(p) == "web")

    def web_ready() -> bool:
        return ready(installed.core.read_namespaced_pod(web, NAMESPACE).to_dict())

    kube.kubectl("scale", "statefulset", f"{RELEASE}-postgresql", "-n", NAMESPACE, "--replicas=0")
    wait(kube, lambda: not web_ready(), 90, "the web pod to go NotReady without Postgres")
    kube.kubectl("scale", "statefulset", f"{RELEASE}-postgresql", "-n", NAMESPACE, "--replicas=1")
    wait(kube, web_ready, 180, "the web pod to be Ready again")
    # The same pod, never restarted by its liveness probe, and the data on the claim kept.
    (status,) = installed.core.read_namespaced_pod(web, NAMESPACE).to_dict()["status"]["container_statuses"]
    assert status["restart_count"] == 0
    assert int(installed.psql("select count(*) from django_migrations")) > 0


def api(installed: Installed, password: str) -> httpx.Client:
    """The REST API as gpuctl calls it, through the web Service's ClusterIP (kube-proxy), with the
    header the Ingress would add; signed in with a token of the researcher's."""
    service = installed.core.read_namespaced_service(f"{RELEASE}-web", NAMESPACE).to_dict()
    headers = {"Host": "localhost", "X-Forwarded-Proto": "https"}
    http = httpx.Client(base_url=f"http://{service['spec']['cluster_ip']}", headers=headers, timeout=10)
    body = {"email": EMAIL, "password": password, "name": "upgrade", "scopes": ["read", "submit"], "otp": ""}
    # Right after the web was away (the Postgres test), kube-proxy may not route to it yet.
    wait(installed.kube, lambda: _answers(http), 60, "the web Service to answer")
    token = http.post("/api/v1/auth/token/", json=body)
    assert token.status_code == 201, token.text
    http.headers["Authorization"] = f"Bearer {token.json()['secret']}"
    return http


def _answers(http: httpx.Client) -> bool:
    try:
        return http.get("/readyz").status_code == 200
    except httpx.HTTPError:
        return False


def test_an_upgrade_while_a_job_runs_loses_no_job_and_no_request(installed: Installed, password: str) -> None:
    http = api(installed, password)
    path = submit(http, "i=0; while [ $i -lt 45 ]; do echo tick $i; i=$((i+1)); sleep 1; done")

    def state() -> str:
        return str(http.get(path).json()["state"])

    wait(installed.kube, lambda: state() == "running", 120, "the job to run")

    # The same image under a new tag, as a rebuild pushed with a new version would arrive.
    portal = installed.node.ctr("images", "ls", "-q").split()
    (current,) = (ref for ref in portal if ref.startswith("docker.io/gpu-portal/portal:"))
    rebuilt = f"{current}-rebuilt"
    installed.node.ctr("images", "tag", current, rebuilt)
    with Poller(http, path) as poller:
        started = time.monotonic()
        out = installed.kube.helm(
            "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
            "--set", f"image.tag={rebuilt.rsplit(':', 1)[1]}", "--wait", "--timeout", "600s", check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
    assert "has been upgraded" in out, f"{out}\n{diagnose(installed.kube)}"
    print(f"\nhelm upgrade to a rebuilt image, --wait: {seconds:.1f} s; {poller.count} requests during it")
    assert poller.failures == [], poller.failures

    def web_images() -> set[str]:
        return {p["spec"]["containers"][0]["image"] for p in installed.pods() if component(p) == "web"}

    # The old web pod may still be stopping (its 5 s) when helm returns; containerd names it in full.
    new = {rebuilt.removeprefix("docker.io/")}
    wait(installed.kube, lambda: web_images() == new, 60, "only the rebuilt image's web pod")

    wait(installed.kube, lambda: state() == "succeeded", 180, "the job to finish after the upgrade")
    job = http.get(path).json()
    assert job["exit_code"] == 0
    # One Kubernetes Job and one pod for it, before and after the upgrade: none lost, none doubled.
    uid = f"{UID_LABEL}={job['id']}"
    assert len(installed.kube.get("jobs", "-A", "-l", uid)["items"]) == 1
    assert len(installed.kube.get("pods", "-A", "-l", uid)["items"]) == 1
    log = http.get(f"{path}logs/")
    assert "tick 44" in log.text, log.text[-500:]


def test_uninstall_stops_every_portal_container_and_leaves_what_the_readme_says(installed: Installed) -> None:
    kube = installed.kube
    kube.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "300s")

    def gone() -> bool:
        node_namespace = kube.kubectl("get", "namespace", NODE_NAMESPACE, check=False)
        return not installed.pods() and "NotFound" in node_namespace

    # No portal container runs on the node any more (a web pod takes its 5 s to stop after helm
    # returns); the node namespace the chart made is gone.
    wait(kube, gone, 120, "the pods and the node namespace to go")
    selector = f"app.kubernetes.io/instance={RELEASE}"
    kinds = "all,secrets,configmaps,pvc,serviceaccounts,roles,rolebindings,networkpolicies,jobs"
    left = kube.kubectl("get", kinds, "-n", NAMESPACE, "-l", selector, "-o", "name").split()
    kept = [name.format(r=RELEASE) for name in KEPT + KEPT_CLAIMS]
    assert sorted(left) == sorted(kept)
    cluster_wide = (
        "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings"
    )
    assert kube.kubectl("get", cluster_wide, "-l", selector, "-o", "name") == ""
    # The tenant's namespace and its finished jobs are the portal's, not the chart's (README).
    assert kube.get("jobs", "-n", "gp-real-lab")["items"]
