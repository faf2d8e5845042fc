"""The release of test_chart_cluster.py, upgraded (secrets and volumes survive) and uninstalled
(only what the chart's README lists as kept remains). Runs after test_chart_rbac.py."""

from __future__ import annotations

import time

import pytest

from tests.helm.chart import CHART, value_args
from tests.helm.release import RELEASE, Release, kept_after_uninstall

pytestmark = pytest.mark.cluster


def test_upgrade_keeps_the_secret_key_passwords_and_volumes(release: Release) -> None:
    before = release.snapshot()
    started = time.monotonic()
    release.kube.helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        release.namespace,
        *value_args({**release.values, "web.replicas": "1"}),
        "--timeout",
        "300s",
    )
    print(f"\nhelm upgrade: {time.monotonic() - started:.1f} s")
    after = release.snapshot()
    assert after == before
    web = release.kube.get("deployment", f"{RELEASE}-web", "-n", release.namespace)
    assert web["spec"]["replicas"] == 1
    assert (
        release.kube.helm("history", RELEASE, "-n", release.namespace, "-o", "json").count('"revision"') == 2
    )


def test_uninstall_leaves_only_what_the_readme_says_is_kept(release: Release) -> None:
    release.uninstall()
    kinds = "all,secrets,configmaps,pvc,serviceaccounts,roles,rolebindings,networkpolicies"
    selector = f"app.kubernetes.io/instance={RELEASE}"
    left = release.kube.kubectl("get", kinds, "-n", release.namespace, "-l", selector, "-o", "name")
    assert sorted(left.split()) == kept_after_uninstall()
    cluster_wide = release.kube.kubectl(
        "get",
        "clusterroles,clusterrolebindings,validatingadmissionpolicies,"
        "validatingadmissionpolicybindings,namespaces",
        "-l",
        f"app.kubernetes.io/instance={RELEASE}",
        "-o",
        "name",
    )
    assert cluster_wide == ""
