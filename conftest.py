"""Root fixtures: the personas (owner, member, viewer, outsider, admin) and API clients for them.

Real services: Postgres and Redis come from `make test` (deploy/setup/services.sh); the local
Kubernetes control plane comes from tests.fixtures.cluster. In CI a missing real part fails.
"""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.fixtures.no_skips",
    "tests.fixtures.cluster",
    "tests.fixtures.personas",
    "tests.fixtures.figures",
]


@pytest.fixture(scope="session", autouse=True)
def _no_stale_reconcile_marks(django_db_setup: None) -> None:
    """A new test database reuses job ids: drop the pending-reconcile marks (workloads/services/
    publisher.py) an earlier run on this database name left in Redis, or its jobs would wait for them
    to expire before their first reconcile."""
    import redis
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection

    from workloads.services.publisher import PENDING_PREFIX

    client = redis.Redis.from_url(settings.REDIS_URL)
    pattern = cache.make_key(f"{PENDING_PREFIX}:{connection.settings_dict['NAME']}:*")
    for key in client.scan_iter(match=pattern, count=1000):
        client.delete(key)
