"""Root fixtures: the personas (owner, member, viewer, outsider, admin) and API clients for them.

Real services: Postgres and Redis come from `make test` (deploy/setup/services.sh); the local
Kubernetes control plane comes from tests.fixtures.cluster. In CI a missing real part fails.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest_plugins = ["tests.fixtures.cluster", "tests.fixtures.personas"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """Nothing may skip: a skipped test (a missing real part) is reported as a failure, CI or not."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, which is not allowed (a real part is missing): {report.longrepr}"
