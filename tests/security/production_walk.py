"""Run as a program under the production settings (GPUPORTAL_PRODUCTION=1, portal.settings, no test
overrides): GET every URL given as each given user, through the full middleware stack, and write
what came back (status, security headers, cookie flags) as JSON. Driven from
tests/security/test_deploy_headers.py against the test database."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HEADERS = (
    "Strict-Transport-Security",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Content-Security-Policy",
    "X-Frame-Options",
    "Location",
)


def main(source: str, target: str) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from accounts.models import User

    job: dict[str, Any] = json.loads(Path(source).read_text(encoding="utf-8"))
    host = settings.ALLOWED_HOSTS[0]
    results: list[dict[str, Any]] = []
    for who, user_pk in job["users"].items():
        client = Client(HTTP_HOST=host, raise_request_exception=False)
        if user_pk is not None:
            client.force_login(User.objects.get(pk=user_pk))
        for url in job["urls"]:
            results.append({"who": who, "url": url, **_fetch(client, url)})
    summary = {"debug": settings.DEBUG, "hsts": settings.SECURE_HSTS_SECONDS, "results": results}
    Path(target).write_text(json.dumps(summary), encoding="utf-8")


def _fetch(client: Any, url: str) -> dict[str, Any]:
    response = client.get(url, secure=True)
    return {
        "status": response.status_code,
        "headers": {name: response.get(name, "") for name in HEADERS},
        "cookies": [
            {"key": c.key, "secure": bool(c["secure"]), "httponly": bool(c["httponly"])}
            for c in response.cookies.values()
        ],
    }


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
