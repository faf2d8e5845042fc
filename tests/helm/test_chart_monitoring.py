"""The chart's monitoring in the kube-prometheus-stack way: with the values on, `helm template` renders a
ServiceMonitor that scrapes the web Service's /metrics with the token the web pods check, a
PrometheusRule with the portal's alerts and a Grafana dashboard ConfigMap; off (the default), none.
The alerts pass Prometheus' own rule checker (promtool), and the rules and the dashboard name only
metrics the portal serves."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.personas import World
from tests.helm.chart import CHART, JSON, of_kind, pod_specs, render, tool

RULES = CHART / "monitoring" / "rules.yaml"
DASHBOARD = CHART / "monitoring" / "dashboard.json"
ON = {
    "monitoring.serviceMonitor.enabled": "true",
    "monitoring.prometheusRule.enabled": "true",
    "monitoring.dashboard.enabled": "true",
    "monitoring.serviceMonitor.labels.release": "kps",
}


def _promtool(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )


def test_monitoring_renders_the_three_kinds_only_when_asked() -> None:
    off = render(None, "gp", "portal", {})
    assert not [d for d in off if d["kind"] in ("ServiceMonitor", "PrometheusRule")]
    assert not [d for d in of_kind(off, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]

    docs = render(None, "gp", "portal", ON)
    (monitor,) = of_kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    web = next(s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "gp-gpu-portal-web")
    assert monitor["spec"]["selector"]["matchLabels"] == web["spec"]["selector"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["port"] in [p["name"] for p in web["spec"]["ports"]]
    # The scrape sends the token the web pods check, from a Secret the chart makes.
    credentials = endpoint["authorization"]["credentials"]
    secrets = {s["metadata"]["name"]: s for s in of_kind(docs, "Secret")}
    assert len(secrets[credentials["name"]]["data"][credentials["key"]]) >= 48
    web_env = {e["name"]: e for e in pod_specs(docs)["gp-gpu-portal-web"]["containers"][0]["env"]}
    assert web_env["GPU_METRICS_TOKEN"]["valueFrom"]["secretKeyRef"] == credentials

    (rule,) = of_kind(docs, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    (dashboard,) = [
        d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "gp-gpu-portal-dashboard"
    ]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["gpu-portal.json"]) == json.loads(DASHBOARD.read_text())


def test_the_alert_rules_pass_promtool(tmp_path: Path) -> None:
    good = _promtool(RULES)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "SUCCESS: 6 rules found" in good.stdout, good.stdout
    # The checker really parses the expressions: a broken one is refused.
    broken = tmp_path / "broken.yaml"
    broken.write_text(RULES.read_text().replace("sum(gpuportal_gpus{health=", "sum(gpuportal_gpus{health=="))
    assert _promtool(broken).returncode != 0


def _referenced() -> set[str]:
    exprs = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    exprs += [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]
    names = {n for e in exprs for n in re.findall(r"\bgpuportal_[a-z_]+", e)}
    return {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in names}


@pytest.mark.django_db
def test_the_rules_and_the_dashboard_name_only_metrics_the_portal_serves(world: World) -> None:
    client = Client()
    client.force_login(world.admin)
    response = client.get("/metrics")
    assert response.status_code == 200
    served = {f.name for f in text_string_to_metric_families(response.content.decode())}
    referenced = _referenced()
    assert len(referenced) >= 12
    assert referenced <= served, sorted(referenced - served)


def test_the_dashboard_is_grafana_json_with_a_table_legend_per_panel() -> None:
    board: JSON = json.loads(DASHBOARD.read_text())
    assert board["uid"] == "gpu-portal"
    assert board["templating"]["list"][0]["type"] == "datasource"
    for panel in board["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["options"]["legend"]["displayMode"] == "table"  # numbers, not colour alone
