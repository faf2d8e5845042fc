"""Root fixtures: the personas (owner, member, viewer, outsider, admin) and API clients for them.

Real services: Postgres and Redis come from `make test` (deploy/setup/services.sh); the local
Kubernetes control plane comes from tests.fixtures.cluster. In CI a missing real part fails.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest_plugins = ["tests.fixtures.cluster", "tests.fixtures.personas"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """In CI nothing may skip: a skipped test (a missing real part) is reported as a failure."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which is not allowed: {report.longrepr}"
