"""Postgres (or, with no DATABASE_URL, the embedded demo's SQLite file) and Redis: the cache, the
Channels layer and the Celery broker. Without REDIS_URL all three are in-process (the demo)."""

from __future__ import annotations

from typing import Any

import environ

from portal.settings.environment import DB_POOL_SIZE, REDIS_URL, ROLE, conn_max_age, database_url

DATABASES: dict[str, dict[str, Any]] = {"default": environ.Env.db_url_config(database_url)}
DATABASES["default"]["ATOMIC_REQUESTS"] = True
EMBEDDED = DATABASES["default"]["ENGINE"].endswith("sqlite3")
# A pool of Postgres connections per process (psycopg_pool): an ASGI request otherwise opens and
# closes its own connection (about 6 ms on loopback, as long as a small API read).
if DB_POOL_SIZE and not EMBEDDED:
    DATABASES["default"]["OPTIONS"] = {"pool": {"min_size": 2, "max_size": DB_POOL_SIZE, "timeout": 20}}
# Processes that keep their connection (environment.py: CONN_MAX_AGE by role) check it before its first
# use in each unit of work (CONN_HEALTH_CHECKS), so one killed by a Postgres restart is replaced, not
# used. Web processes pool instead: Django refuses a pool with persistent connections.
_POOLED = bool(DB_POOL_SIZE and not EMBEDDED)
DATABASES["default"]["CONN_MAX_AGE"] = 0 if _POOLED else conn_max_age
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

if not EMBEDDED:
    # Shown in pg_stat_activity and in Postgres' connection log lines: which tier holds (or churns)
    # connections, at a glance.
    DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = f"gpuportal-{ROLE}"
if EMBEDDED:
    # One process, several threads (web, worker, controller): WAL and immediate transactions avoid
    # "database is locked" between readers and the writer.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
