"""gpu test fixtures: `gpu_sample` is hand-made (unmanaged), so transactional tests' flush misses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection


@pytest.fixture(autouse=True)
def _empty_sample_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "django_db_setup" not in request.fixturenames:
        return
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and marker.kwargs.get("transaction"):
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE gpu_sample")
