"""The chart installed for real: every portal pod on the real node as a container, from the images
`make images` builds and Debian-built stand-ins for the bundled Postgres and Redis
(deploy/localcluster/realnode/store-images.sh), claims bound to the node's local volumes, names
resolved by the cluster DNS, Services routed by kube-proxy, NetworkPolicies enforced.

Its own node, as test_node_daemonset.py has (the chart's device plugin would clash with the
session's in-process one). The tests run in file order on one release.
"""

from __future__ import annotations

import json
import secrets
import shlex
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.db.migrations.loader import MigrationLoader
from kubernetes import client

from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import start_real_node
from tests.helm.chart import CHART, Kube
from tests.helm.release import KEPT, KEPT_CLAIMS
from tests.realnode.chart_release import (
    EMAIL,
    NAMESPACE,
    NODE,
    NODE_GPUS,
    NODE_NAMESPACE,
    PORTAL_URL,
    RELEASE,
    SEED,
    Installed,
    api,
    chart_values,
    component,
    diagnose,
    log_evidence,
    port_forward,
    ready,
    submit,
    wait,
)
from tests.realnode.conftest import require_netns
from tests.realnode.helpers import delete_pods, run_to_end
from tests.realnode.images import load_built_image, load_rebuilt_image, load_store_images
from tests.realnode.probes import LISTEN_PORT, Try, listener_argv, outcomes, python_argv, shell_script
from tests.realnode.test_services import _cluster_ip, _serving
from tests.realnode.watchers import ExitWatch, Poller
from workloads.k8s.labels import UID_LABEL

PORTAL_COMPONENTS = {"web", "worker", "beat", "controller", "provisioner", "postgresql", "redis"}


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

        # The submit form, as a researcher fills it in; the site offers the real node as placement.
        page.goto(f"{PORTAL_URL}/jobs/submit/")
        page.select_option("#id_project", "real-lab")
        page.fill("#id_image", "gpuportal.local/busybox:1")
        page.fill("#id_command", shlex.join(["sh", "-c", script]))
        page.fill("#id_gpus", "1")
        page.fill("#id_cpu_millicores", "100")
        page.fill("#id_memory_mib", "64")
        page.select_option("#id_placement", "real-node")
        page.click("#submit-job")
        # The job's page, opened at once: it follows the log as the job runs.
        page.wait_for_url(lambda url: "/jobs/submit/" not in url, timeout=30_000)
        path = "/api/v1" + page.url.removeprefix(PORTAL_URL)
        log = page.locator("#job-log")
        try:
            expect(log).to_contain_text("hello from the installed portal", timeout=120_000)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log_evidence(installed, http, path)}") from exc
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


# A namespace no policy selects: the look-alike of a portal worker and an open control pod live there.
OUTSIDE = "rn-outside"
LOOK_ALIKE = {
    "app.kubernetes.io/instance": RELEASE,
    "app.kubernetes.io/part-of": "gpu-portal",
    "app.kubernetes.io/component": "worker",
}


def _running_pod(installed: Installed, namespace: str, selector: str) -> dict[str, Any] | None:
    pods = [p.to_dict() for p in installed.core.list_namespaced_pod(namespace, label_selector=selector).items]
    running = [p for p in pods if p["status"]["phase"] == "Running" and p["status"]["pod_ip"]]
    return running[0] if running else None


def _exec(installed: Installed, target: str, argv: list[str], namespace: str = NAMESPACE) -> str:
    return installed.kube.kubectl("exec", "-n", namespace, target, "--", *argv)


DONE, REFUSED = "completed", "refused"
# Who tries what, and what each policy lets happen.
EXPECTED = {
    # Its server is up (exec is no network traffic), so the refusals below are the policies'.
    "other job itself": {"own": DONE},
    # The portal's worker reaches its stores and no other private address (its egress policy: it
    # posts to URLs tenants choose); the web reaches the stores; no second port is reachable.
    "worker": {
        "postgres": DONE, "redis": DONE, "own-second": DONE,
        "web": REFUSED, "web-second": REFUSED, "other-job": REFUSED, "open": REFUSED,
    },
    "web": {
        "postgres": DONE, "redis": DONE, "own-second": DONE,
        "worker-second": REFUSED, "other-job": REFUSED,
    },
    # A worker's labels in another namespace: the web's port only (the stores take the release's own
    # namespace's pods); an open pod (control) is reached.
    "look-alike": {
        "postgres": REFUSED, "redis": REFUSED, "web": DONE, "web-second": REFUSED,
        "worker-second": REFUSED, "other-job": REFUSED, "open": DONE,
    },
    # A tenant's job reaches nothing at all (it resolves names: checked apart).
    "tenant job": dict.fromkeys(("postgres", "redis", "web", "web-second", "other-job", "open"), REFUSED),
}  # fmt: skip


def test_every_policy_refuses_and_allows_connections_between_real_pods(
    installed: Installed, password: str
) -> None:
    """Each of the chart's policies (default deny, web, postgresql, redis, the worker's egress, its API
    server address read at install) and the tenant's (default
    deny but DNS) with a connection it allows and one it refuses, tried from real pods: a tenant's
    job, a look-alike of a portal worker in another namespace, the worker and the web themselves."""
    kube, http = installed.kube, api(installed, password)
    pods = {component(p): p for p in installed.pods()}
    postgres = Try("postgres", _cluster_ip(installed.core, NAMESPACE, f"{RELEASE}-postgresql"), 5432)
    redis = Try("redis", _cluster_ip(installed.core, NAMESPACE, f"{RELEASE}-redis"), 6379)
    web = Try("web", _cluster_ip(installed.core, NAMESPACE, f"{RELEASE}-web"), 80)
    web_second = Try("web-second", pods["web"]["status"]["pod_ip"], LISTEN_PORT)
    worker_second = Try("worker-second", pods["worker"]["status"]["pod_ip"], LISTEN_PORT)
    own_second = Try("own-second", "127.0.0.1", LISTEN_PORT)
    for deployment in ("web", "worker"):
        _exec(installed, f"deploy/{RELEASE}-{deployment}", listener_argv())

    # Another project's job serving on 8080, and an open pod in a namespace no policy selects.
    other_path = submit(http, "exec httpd -f -p 8080 -h /", project="other-lab")
    other_selector = f"{UID_LABEL}={http.get(other_path).json()['id']}"
    kube.kubectl("create", "namespace", OUTSIDE)
    try:
        installed.core.create_namespaced_pod(OUTSIDE, _serving("open", {"app": "open"}, "reached"))
        other = wait(kube, lambda: _running_pod(installed, "gp-other-lab", other_selector), 120, "other job")
        opened = wait(kube, lambda: _running_pod(installed, OUTSIDE, "app=open"), 60, "the open pod")
        other_job = Try("other-job", other["status"]["pod_ip"], 8080)
        open_pod = Try("open", opened["status"]["pod_ip"], 8080)
        own = shell_script([Try("own", "127.0.0.1", 8080)])
        worker_tries = [postgres, redis, web, own_second, web_second, other_job, open_pod]
        look_alike_tries = [postgres, redis, web, web_second, worker_second, other_job, open_pod]
        seen = {
            "other job itself": _exec(
                installed, other["metadata"]["name"], ["sh", "-c", own], "gp-other-lab"
            ),
            "worker": _exec(installed, f"deploy/{RELEASE}-worker", python_argv(worker_tries)),
            "web": _exec(
                installed,
                f"deploy/{RELEASE}-web",
                python_argv([postgres, redis, own_second, worker_second, other_job]),
            ),
        }
        look_alike = shell_script(look_alike_tries, settle=postgres)
        _, seen["look-alike"] = run_to_end(
            installed.core, OUTSIDE, "look-alike", look_alike, labels=LOOK_ALIKE, timeout=180
        )
        # The tenant's job, through the API as a researcher submits it: the provisioner's policy.
        lookup = f"{RELEASE}-web.{NAMESPACE}.svc.cluster.local"
        tenant_tries = [postgres, redis, web, web_second, other_job, open_pod]
        tenant_path = submit(http, shell_script(tenant_tries, settle=web, lookup=lookup))
        ended = lambda: http.get(tenant_path).json()["state"] == "succeeded"  # noqa: E731
        wait(kube, ended, 240, "the tenant's job to end")
        seen["tenant job"] = http.get(f"{tenant_path}logs/").text
    finally:
        http.post(f"{other_path}cancel/")
        delete_pods(installed.core, OUTSIDE, ["open", "look-alike"])
        kube.kubectl("delete", "namespace", OUTSIDE, "--wait=false", check=False)

    logs = "\n".join(f"--- {who}\n{log}" for who, log in seen.items())
    assert {who: outcomes(log) for who, log in seen.items()} == EXPECTED, logs
    # Default-deny egress lets DNS through: the name resolves to the web Service's address.
    answer = seen["tenant job"].split("lookup:", 1)[-1]
    assert web.host in answer.split(lookup, 1)[-1], logs


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


def test_an_upgrade_while_a_job_runs_loses_no_job_and_no_request(installed: Installed, password: str) -> None:
    def web_images() -> set[str]:
        """The image ids the web pods' containers run (containerd's digest of the configuration)."""
        running = [p for p in installed.pods() if component(p) == "web" and p["status"]["container_statuses"]]
        return {p["status"]["container_statuses"][0]["image_id"] for p in running}

    (old_image,) = web_images()
    # The rebuilt image: a new configuration over the same layers, so a new image id, a new tag.
    # Loaded before the job starts, so the job is still running when the upgrade begins.
    rebuilt = load_rebuilt_image(installed.node, "portal", f"rebuilt-{secrets.token_hex(3)}")
    http = api(installed, password)
    path = submit(http, "i=0; while [ $i -lt 45 ]; do echo tick $i; i=$((i+1)); sleep 1; done")

    def state() -> str:
        return str(http.get(path).json()["state"])

    wait(installed.kube, lambda: state() == "running", 120, "the job to run")
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

    # The old web pod may still be stopping (its 5 s) when helm returns.
    wait(installed.kube, lambda: len(web_images()) == 1, 60, "only one web image running")
    (new_image,) = web_images()
    assert new_image != old_image, "the upgrade left the web on the old image"
    (web,) = (p for p in installed.pods() if component(p) == "web")
    assert web["spec"]["containers"][0]["image"] == rebuilt.removeprefix("docker.io/")

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
