"""The chart as `helm` renders it, without a cluster: lint, the schema's refusals, restricted pods,
and least-privilege rules that a reviewer would otherwise check by eye (the static half of the
least-privilege checks; tests/helm/test_chart_rbac.py is the installed half)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from portal import liveness
from tests.helm.chart import CHART, JSON, of_kind, pod_specs, render, run_offline

VALUE_SETS = {
    "bundled": {},
    "external-database": {
        "database.bundled": "false",
        "database.url": "postgres://portal:pw@db.example.org/portal",
    },
    "ingress": {"ingress.enabled": "true", "ingress.className": "nginx", "ingress.host": "gpus.example.org"},
}
FORBIDDEN_RESOURCES = {"secrets", "pods/exec", "pods/attach", "pods/portforward", "nodes/proxy", "*"}
FORBIDDEN_VERBS = {"escalate", "impersonate", "*"}


def test_helm_lint_strict_passes() -> None:
    out = run_offline("helm", "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "web.replicas=two"], "at '/web/replicas': got string, want integer"),
        (["--set", "web.bogus=1"], "at '/web': additional properties 'bogus' not allowed"),
        (["--set", "web.server=gunicorn"], "at '/web/server'"),
        (["--set", "database.bundled=false"], "at '/database/url': minLength"),
        # kube-* would let the provisioner's admission policy match kube-system.
        (["--set", "portal.namespacePrefix=kube-"], "at '/portal/namespacePrefix': 'not' failed"),
        # Below 1000 project pods could run as a system account of the node.
        (["--set", "portal.projectUidBase=5"], "at '/portal/projectUidBase': minimum"),
        (["--set", "node.backend=fake"], "at '/node/backend'"),
        (["--set", "node.kubeletRootDir=var/lib/kubelet"], "at '/node/kubeletRootDir'"),
        (["--set", "node.portalUrl=portal.example.org"], "at '/node/portalUrl'"),
    ],
)
def test_bad_values_fail_naming_the_field(values: list[str], message: str) -> None:
    out = run_offline("helm", "template", "gp", str(CHART), *values, check=False)
    assert "values don't meet the specifications of the schema" in out
    assert message in out
    assert "kind: Deployment" not in out


def test_the_release_namespace_may_not_look_like_a_tenant() -> None:
    out = run_offline("helm", "template", "gp", str(CHART), "-n", "gp-portal", check=False)
    assert "the release namespace gp-portal starts with the tenant prefix gp-" in out


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_value_set_renders_the_whole_portal(name: str) -> None:
    docs = render(None, "gp", "portal", VALUE_SETS[name])
    deployments = {d["metadata"]["name"] for d in of_kind(docs, "Deployment")}
    assert deployments == {
        f"gp-gpu-portal-{c}" for c in ("web", "worker", "beat", "controller", "provisioner")
    }
    stores = {d["metadata"]["name"] for d in of_kind(docs, "StatefulSet")}
    bundled = {"gp-gpu-portal-postgresql", "gp-gpu-portal-redis"}
    assert stores == (bundled - {"gp-gpu-portal-postgresql"} if name == "external-database" else bundled)
    assert bool(of_kind(docs, "Ingress")) == (name == "ingress")
    hooks = {
        d["metadata"]["name"]: d["metadata"]["annotations"]["helm.sh/hook"]
        for d in docs
        if "helm.sh/hook" in d["metadata"].get("annotations", {})
    }
    assert hooks == {"gp-gpu-portal-migrate": "post-install,pre-upgrade", "gp-gpu-portal-test-readyz": "test"}


def _containers(spec: JSON) -> list[JSON]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_portal_pods_are_restricted_and_only_the_device_plugin_is_privileged() -> None:
    for owner, spec in pod_specs(render(None, "gp", "portal", {})).items():
        if owner == "gp-gpu-portal-node":
            privileged = {c["name"] for c in spec["containers"] if c["securityContext"].get("privileged")}
            assert privileged == {"device-plugin"}
            # The image runs as 10001; the kubelet's sockets are root's, so both containers say root.
            assert {c["name"]: c["securityContext"]["runAsUser"] for c in spec["containers"]} == {
                "device-plugin": 0,
                "agent": 0,
            }
            agent = next(c for c in spec["containers"] if c["name"] == "agent")["securityContext"]
            assert agent["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}
            assert agent["seccompProfile"] == {"type": "RuntimeDefault"}
            assert spec["automountServiceAccountToken"] is False
            continue
        assert spec["securityContext"]["runAsNonRoot"] is True, owner
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, owner
        assert not [k for k in ("hostPID", "hostNetwork", "hostIPC") if spec.get(k)], owner
        assert not [v for v in spec.get("volumes", []) if "hostPath" in v], owner
        for c in _containers(spec):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, owner
            assert sc["capabilities"] == {"drop": ["ALL"]}, owner
            assert sc["readOnlyRootFilesystem"] is True, owner
            assert not sc.get("privileged"), owner
            assert c["resources"]["requests"], owner


def test_no_role_grants_secrets_exec_proxy_escalate_or_impersonate() -> None:
    docs = render(None, "gp", "portal", {})
    roles = [*of_kind(docs, "ClusterRole"), *of_kind(docs, "Role")]
    rules: list[tuple[str, Any]] = [(r["metadata"]["name"], rule) for r in roles for rule in r["rules"]]
    assert len(rules) > 10
    for role, rule in rules:
        resources = set(rule["resources"])
        if "secrets" in resources:
            # Made and never read: a job's SSH Secret, which the admission policy confines.
            assert (role, rule["verbs"]) == ("gp-gpu-portal-tenant", ["create"]), rule
            resources.discard("secrets")
        assert not FORBIDDEN_RESOURCES & resources, (role, rule)
        assert not FORBIDDEN_VERBS & set(rule["verbs"]), (role, rule)
        assert "*" not in rule.get("apiGroups", []), (role, rule)
        if "bind" in rule["verbs"]:
            assert role == "gp-gpu-portal-provisioner"
            assert rule["resourceNames"] == ["gp-gpu-portal-tenant", "gp-gpu-portal-tenant-read"]
    bindings = [*of_kind(docs, "ClusterRoleBinding"), *of_kind(docs, "RoleBinding")]
    assert not {"cluster-admin", "admin", "edit"} & {b["roleRef"]["name"] for b in bindings}


def test_the_web_server_is_switchable() -> None:
    def command(values: dict[str, str]) -> list[str]:
        docs = of_kind(render(None, "gp", "portal", values), "Deployment")
        web = next(d for d in docs if d["metadata"]["name"].endswith("-web"))
        result: list[str] = web["spec"]["template"]["spec"]["containers"][0]["command"]
        return result

    assert command({})[:3] == ["python", "-m", "uvicorn"]
    assert command({"web.server": "daphne"})[0] == "daphne"


def test_the_secret_key_is_generated_and_marked_kept() -> None:
    secrets = {s["metadata"]["name"]: s for s in of_kind(render(None, "gp", "portal", {}), "Secret")}
    key = secrets["gp-gpu-portal-secret-key"]
    assert key["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert len(key["data"]["secret-key"]) >= 64
    again = {s["metadata"]["name"]: s for s in of_kind(render(None, "gp", "portal", {}), "Secret")}
    # Offline there is nothing to look up, so each render draws a new key; on a cluster, the live one wins.
    assert again["gp-gpu-portal-secret-key"]["data"] != key["data"]


def _resolved_env(docs: list[JSON], container: JSON) -> dict[str, str]:
    """A container's environment as the kubelet would give it: Secret references and $(VAR) filled in."""
    secrets = {s["metadata"]["name"]: s["data"] for s in of_kind(docs, "Secret")}
    env: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = base64.b64decode(secrets[ref["name"]][ref["key"]]).decode()
        else:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], item["value"])
    return env


def test_the_charts_environment_passes_the_production_deploy_check() -> None:
    docs = render(None, "gp", "portal", {})
    web = next(d for d in of_kind(docs, "Deployment") if d["metadata"]["name"] == "gp-gpu-portal-web")
    env = _resolved_env(docs, web["spec"]["template"]["spec"]["containers"][0])
    assert env["DATABASE_URL"].startswith("postgres://portal:")
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env={"PATH": os.environ["PATH"], "HOME": "/tmp", **env},
        cwd=CHART.parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "System check identified no issues" in out.stdout


def test_the_node_values_reach_the_daemonset() -> None:
    """Backend, kubelet root and portal URL: what the real-node DaemonSet test sets (tests/realnode)."""
    values = {
        "node.backend": "sim",
        "node.kubeletRootDir": "/var/lib/k0s/kubelet/",
        "node.portalUrl": "http://10.0.0.9:8000",
    }
    (ds,) = of_kind(render(None, "gp", "portal", values), "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    plugin, agent = _containers(spec)
    assert plugin["args"][:2] == agent["args"][:2] == ["--backend", "sim"]
    assert {"name": "GPU_PORTAL_URL", "value": "http://10.0.0.9:8000"} in agent["env"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"
    assert (
        volumes["device-plugins"]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"
    )  # fixed by the kubelet


def test_the_web_answers_the_host_name_the_node_agents_call_it_by() -> None:
    """The agents post samples to the web Service's cluster name, which Django must allow."""
    docs = render(None, "gp", "portal", {})
    (ds,) = of_kind(docs, "DaemonSet")
    _, agent = _containers(ds["spec"]["template"]["spec"])
    url = next(e["value"] for e in agent["env"] if e["name"] == "GPU_PORTAL_URL")
    web = pod_specs(docs)["gp-gpu-portal-web"]["containers"][0]
    allowed = next(e["value"] for e in web["env"] if e["name"] == "ALLOWED_HOSTS").split(",")
    assert urlsplit(url).hostname in allowed, (url, allowed)
    assert allowed[0] == "portal.example.org"  # the probes' Host: the first of portal.allowedHosts


def test_a_stopping_web_pod_serves_until_the_service_has_dropped_it() -> None:
    """A rolling upgrade refused requests while the old pod's route was still programmed."""
    spec = pod_specs(render(None, "gp", "portal", {}))["gp-gpu-portal-web"]
    (web,) = spec["containers"]
    assert web["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert spec.get("terminationGracePeriodSeconds", 30) > 5


def test_the_portals_pods_run_where_the_root_scheduling_values_say() -> None:
    """Every pod of the portal's namespace (the test's too) takes them; the node DaemonSet keeps its own."""
    values = {
        "nodeSelector.pool": "system",
        "tolerations[0].key": "dedicated",
        "tolerations[0].operator": "Exists",
        "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight": "1",
    }
    docs = render(None, "gp", "portal", values)
    specs = pod_specs(docs) | {d["metadata"]["name"]: d["spec"] for d in of_kind(docs, "Pod")}
    portal = {name: spec for name, spec in specs.items() if name != "gp-gpu-portal-node"}
    assert {"gp-gpu-portal-web", "gp-gpu-portal-postgresql", "gp-gpu-portal-migrate"} <= set(portal)
    for name, spec in portal.items():
        assert spec["nodeSelector"] == {"pool": "system"}, name
        assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}], name
        assert spec["affinity"]["nodeAffinity"], name
    node = specs["gp-gpu-portal-node"]
    assert node["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "affinity" not in node
    default = pod_specs(render(None, "gp", "portal", {}))
    assert not any("nodeSelector" in spec for name, spec in default.items() if name != "gp-gpu-portal-node")


@pytest.mark.parametrize(("values", "pool"), [({}, "20"), ({"web.dbPoolSize": "0"}, "0")])
def test_only_the_web_pods_pool_their_database_connections(values: dict[str, str], pool: str) -> None:
    """A pool per ASGI process (settings.DB_POOL_SIZE); not the workers or the controller: they keep
    one connection per process between tasks and ticks instead (CONN_MAX_AGE by role), and Celery's
    Django fixup would close a pool."""
    found = {}
    for owner, spec in pod_specs(render(None, "gp", "portal", values)).items():
        for container in spec["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            if "DB_POOL_SIZE" in env:
                found[owner] = env["DB_POOL_SIZE"]
    assert found == {"gp-gpu-portal-web": pool}


def test_each_portal_process_names_itself_to_postgres() -> None:
    """GPUPORTAL_ROLE becomes the connections' application_name (settings), so pg_stat_activity and
    Postgres' connection log say which tier a connection belongs to."""
    roles = {}
    for owner, spec in pod_specs(render(None, "gp", "portal", {})).items():
        for container in spec["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            if "GPUPORTAL_ROLE" in env:
                roles[owner] = env["GPUPORTAL_ROLE"]
    expected = ("web", "worker", "beat", "provisioner", "controller")
    assert roles == {f"gp-gpu-portal-{c}": c for c in expected}


def test_the_celery_workers_are_restarted_when_their_consumer_stops(tmp_path: Path) -> None:
    """Both Celery workers carry the liveness file and the probe that reads it (portal/liveness.py);
    the probe's command, run by a real sh, passes on a fresh file and fails on a stale or missing one."""
    probed = {}
    for owner, spec in pod_specs(render(None, "gp", "portal", {})).items():
        for container in spec["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            if liveness.ENV in env:
                assert container["startupProbe"]["exec"] == container["livenessProbe"]["exec"]
                probed[owner] = container["livenessProbe"]["exec"]["command"]
    assert set(probed) == {"gp-gpu-portal-worker", "gp-gpu-portal-provisioner"}
    assert list(probed.values()) == [["sh", "-c", liveness.LIVENESS_COMMAND]] * 2
    alive = tmp_path / "worker-alive"

    def probe() -> int:
        env = {"PATH": os.environ["PATH"], liveness.ENV: str(alive)}
        return subprocess.run(["sh", "-c", liveness.LIVENESS_COMMAND], env=env, check=False).returncode

    assert probe() != 0  # not written yet
    alive.touch()
    assert probe() == 0
    os.utime(alive, (time.time() - liveness.STALE_S - 1,) * 2)
    assert probe() != 0


def _web(values: dict[str, str]) -> JSON:
    web: JSON = pod_specs(render(None, "gp", "portal", values))["gp-gpu-portal-web"]["containers"][0]
    return web


def _env(container: JSON, name: str) -> str:
    return str(next(e["value"] for e in container["env"] if e["name"] == name))


@pytest.mark.parametrize(
    ("values", "proxies"),
    [
        ({}, "0"),
        ({"ingress.enabled": "true"}, "1"),  # the ingress controller is a proxy, whatever was set
        ({"ingress.enabled": "true", "portal.trustedProxies": "2"}, "2"),  # a load balancer in front too
        ({"portal.trustedProxies": "1"}, "1"),  # a proxy of the site's own
    ],
)
def test_behind_the_ingress_the_rate_limits_count_clients_not_the_controller(
    values: dict[str, str], proxies: str
) -> None:
    for server in ("uvicorn", "daphne"):
        web = _web({**values, "web.server": server})
        assert _env(web, "GPUPORTAL_TRUSTED_PROXIES") == proxies, server
        # The server never rewrites the client's address itself (daphne's --proxy-headers believes
        # anyone's X-Forwarded-For); the portal reads it, that many proxies deep.
        assert "--proxy-headers" not in web["command"], server


PRIVATE = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"]


def test_the_worker_reaches_no_private_address_but_its_stores_dns_and_the_api_server() -> None:
    """It delivers webhooks to URLs tenants choose: a second fence beside the address check."""
    values = {"networkPolicy.workerEgress.apiServer[0]": "10.213.0.2/32"}
    (policy,) = (
        d
        for d in of_kind(render(None, "gp", "portal", values), "NetworkPolicy")
        if d["metadata"]["name"].endswith("worker-egress")
    )
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    assert policy["spec"]["policyTypes"] == ["Egress"]
    blocks = [
        peer["ipBlock"] for rule in policy["spec"]["egress"] for peer in rule["to"] if "ipBlock" in peer
    ]
    assert {"cidr": "10.213.0.2/32"} in blocks  # the API server, and nothing else private
    (public,) = (b for b in blocks if b["cidr"] == "0.0.0.0/0")
    assert set(PRIVATE) <= set(public["except"])
    stores = [peer for rule in policy["spec"]["egress"] for peer in rule["to"] if "podSelector" in peer]
    assert stores[0]["podSelector"]["matchExpressions"][1]["values"] == ["postgresql", "redis"]
    # Without the API server's address (no cluster to read it from) there is no policy to break it.
    assert not [
        d
        for d in of_kind(render(None, "gp", "portal", {}), "NetworkPolicy")
        if "egress" in d["metadata"]["name"]
    ]
