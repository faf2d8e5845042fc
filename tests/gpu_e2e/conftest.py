"""Cross-app gpu tests: real Postgres, Redis, local control plane and Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from kubernetes import client

from workloads.k8s.client import RealKubeClient


@pytest.fixture(autouse=True)
def _empty_sample_table(request: pytest.FixtureRequest) -> Iterator[None]:
    """`gpu_sample` is unmanaged, so the transactional flush misses it."""
    yield
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and marker.kwargs.get("transaction"):
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE gpu_sample")


@pytest.fixture
def kube(kube_api: client.ApiClient) -> RealKubeClient:
    return RealKubeClient(kube_api)
