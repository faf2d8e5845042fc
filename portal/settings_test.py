"""Test settings: only overrides. The tests need the real Postgres and Redis (DATABASE_URL, REDIS_URL)."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from portal.settings import *  # noqa: F403

if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
    # CI must never fall back to SQLite: that would hide Postgres-only behaviour.
    raise ImproperlyConfigured("Tests need DATABASE_URL=postgres://... (run them with `make test`).")
if not os.environ.get("REDIS_URL"):
    raise ImproperlyConfigured("Tests need REDIS_URL (run them with `make test`).")

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed; never in production
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
DATABASES["default"]["ATOMIC_REQUESTS"] = True  # noqa: F405
# Two test sessions on one server (two developers, or a helper and CI) need their own database.
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("GPUPORTAL_TEST_DB", "test_portal")}  # noqa: F405
