"""The cluster map in headless Chromium against a live daphne: tiles change with new samples, name the
jobs on them, and nodes show the queue's holds, no reload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.conf import settings
from playwright.sync_api import expect, sync_playwright

from gpu import services
from gpu.models import Gpu, Node
from gpu.tests.factories import batch, make_gpus, make_node, node_token, sample
from gpu.tests.ws import session_cookie
from tests.fixtures.browser import docs_shot
from tests.fixtures.personas import World
from tests.gpu_e2e.live import daphne_server
from workloads.choices import JobState
from workloads.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _post(
    base: str,
    node: Node,
    secret: str,
    gpus: list[Gpu],
    utils: list[int],
    ts: datetime,
    pods: list[str] | None = None,
) -> None:
    samples = []
    for i, (gpu, util) in enumerate(zip(gpus, utils, strict=True)):
        pod = pods[i] if pods else f"job-demo{i}-0"
        ns = ("gp-alpha", pod) if util > 20 else (None, None)
        samples.append(sample(gpu.uuid, ts, util=util, namespace=ns[0], pod=ns[1], temp_c=34 + util * 0.45))
    response = httpx.post(
        f"{base}/api/v1/ingest/samples",
        json=batch(node.name, samples),
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.text


def test_the_cluster_map_updates_live_without_reload(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Playwright's sync API runs an event loop in this thread; the queue's hold marks are ordinary
    # blocking ORM calls between browser steps, so Django's async-context guard is relaxed here only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    nodes = [make_node(f"gpu-node-{i}") for i in range(3)]
    fleet = [(node, make_gpus(node, 4)) for node in nodes]
    secrets = {node.name: node_token(node) for node, _ in fleet}
    cookie = session_cookie(world.admin).split("=", 1)[1]
    resnet = Job.objects.create(
        project=world.alpha, owner=world.member, image="x", name="resnet", gpus=1, state=JobState.RUNNING
    )
    with daphne_server() as base, sync_playwright() as pw:
        now = datetime.now(UTC) - timedelta(seconds=2)
        for n, (node, gpus) in enumerate(fleet):
            _post(base, node, secrets[node.name], gpus, [(17 * (n * 4 + i)) % 100 for i in range(4)], now)
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base}])
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(f"{base}/cluster/")
        expect(page.locator("[data-gpu-status]")).to_have_text("Live", timeout=15000)
        node, gpus = fleet[0]
        tile = page.locator(f".gpu-tile[data-uuid='{gpus[1].uuid}'] [data-field='util']")
        expect(tile).to_have_text("17%")
        page.evaluate("window.__noReload = true")
        _post(base, node, secrets[node.name], gpus, [3, 97, 55, 88], datetime.now(UTC))
        expect(tile).to_have_text("97%", timeout=10000)
        assert page.evaluate("window.__noReload") is True  # same document: no reload happened
        expect(page.locator(f".gpu-tile[data-uuid='{gpus[1].uuid}'] [data-field='users']")).to_contain_text(
            "gp-alpha"
        )
        docs_shot(page, "cluster-map.png")
        # A node the queue holds for a waiting job of several workers says so, live, and stops saying so.
        held = page.locator(f".gpu-node[data-node='{nodes[2].name}'] [data-node-held]")
        expect(held).to_have_count(0)
        services.node_holds_set(holds={nodes[2].name: "alpha/job-x"})
        expect(held).to_have_text("held for alpha/job-x as its GPUs free up", timeout=10000)
        services.node_holds_set(holds={})
        expect(held).to_have_count(0, timeout=10000)
        # A job's pod is shown by the job's name and owner, not its pod id.
        node, gpus = fleet[1]
        pods = [f"{resnet.k8s_name}-q7x2z"] * 4
        _post(base, node, secrets[node.name], gpus, [60, 5, 5, 5], datetime.now(UTC), pods)
        users = page.locator(f".gpu-tile[data-uuid='{gpus[0].uuid}'] [data-field='users']")
        expect(users).to_have_text(f"resnet ({world.member.email})", timeout=10000)
        browser.close()
    assert not [e for e in errors if "Content Security Policy" in e], errors
