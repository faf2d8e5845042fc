"""The chart sets only variables the portal and the node daemons declare (portal/settings/environment.py,
plugin/environment.py), so a setting renamed or dropped there cannot leave the chart setting a name
nothing reads."""

from __future__ import annotations

import pytest

from plugin import environment as node
from portal.settings import environment
from tests.helm.chart import pod_specs, render

# Set in our containers, read by something else.
NOT_SETTINGS = {
    "POSTGRES_PASSWORD": "expanded into DATABASE_URL as $(POSTGRES_PASSWORD)",
    "REDIS_PASSWORD": "expanded into REDIS_URL as $(REDIS_PASSWORD)",
    "NVIDIA_VISIBLE_DEVICES": "the NVIDIA container runtime's",
    "NVIDIA_DRIVER_CAPABILITIES": "the NVIDIA container runtime's",
}
VALUE_SETS = {
    "bundled": {},
    "external": {"database.bundled": "false", "database.url": "postgres://portal:pw@db.example.org/portal"},
}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_the_chart_sets_only_declared_variables(values: dict[str, str]) -> None:
    declared = {
        "portal": set(environment.declared) | set(NOT_SETTINGS),
        "node": {option.env for option in node.declared()} | set(NOT_SETTINGS),
    }
    seen: dict[str, set[str]] = {"portal": set(), "node": set()}
    for owner, spec in pod_specs(render(None, "gp", "portal", values)).items():
        for container in spec["containers"] + spec.get("initContainers", []):
            image = container["image"].rsplit(":", 1)[0].rsplit("/", 1)[-1]
            if image in seen:  # the datastores' containers are their images' business
                names = {item["name"] for item in container.get("env") or []}
                assert names <= declared[image], (
                    f"{owner}/{container['name']}: {sorted(names - declared[image])}"
                )
                seen[image] |= names
    assert "GPUPORTAL_TENANT_ROLE_BINDINGS" in seen["portal"]
    assert "GPU_PORTAL_URL" in seen["node"]
