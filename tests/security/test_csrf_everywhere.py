"""CSRF: every URL pattern (tests/security/routes.py, parameters filled with real objects)
asked to change state by a signed-in browser whose request lacks the CSRF token: every page and
every session-authenticated API call answers 403, or 405 where the URL takes no such method; and
nothing changes. Only the routes in NO_SESSION take no cookie at all (their callers send a token)."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from tests.fixtures.personas import World
from tests.security.populated import populate
from tests.security.routes import every_url
from tests.security.test_tenant_matrix import fingerprint

pytestmark = pytest.mark.django_db

# Answer only a bearer or node token, never a session cookie, so a forged browser request carries
# nothing they accept (tests/security/test_tenant_matrix.py and accounts/tests prove the refusal).
NO_SESSION = {
    "api/v1/auth/token/": "email + password (+ OTP) in the body, rate limited; sets no cookie",
    "api/v1/ingest/samples": "node tokens only",
}
# Changes nothing for any method: it answers the JSON 404 (csrf_exempt, or a POST there got Django's
# HTML 403 page instead of the API's error body).
NOTHING_TO_CHANGE = {"api/": "any /api/ path no route matches: the JSON 404"}
REFUSED = (403, 405)


def forged(user: User) -> Client:
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_no_state_change_without_the_csrf_token(world: World, who: str) -> None:
    urls = every_url(populate(world))
    client = forged(getattr(world, who))
    bad: list[str] = []
    before = fingerprint()
    for route, url in sorted(urls.items()):
        if route.replace("^", "") in NO_SESSION | NOTHING_TO_CHANGE:
            continue
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            response = client.generic(method, url, data="{}", content_type="application/json", secure=True)
            if response.status_code not in REFUSED:
                bad.append(f"{method} {url} -> {response.status_code}")
    assert not bad, f"state-changing requests without a CSRF token were not refused: {bad}"
    assert fingerprint() == before, "a request without a CSRF token changed state"
    assert client.get("/dashboard/").status_code == 200, "the forged client was not signed in"
