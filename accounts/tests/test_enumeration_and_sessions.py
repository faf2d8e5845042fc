"""Sign-in and password reset give the same answer, in about the same time, for a known and an
unknown email; the session key changes at sign-in and again at the two-factor step; the OTP step
of the browser sign-in is rate limited like the CLI's."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value
from django.core import mail
from django.core.cache import cache
from django.test import Client

from tests.fixtures.personas import PASSWORD, World

pytestmark = pytest.mark.django_db

OTP_SECRET = "JBSWY3DPEHPK3PXP"  # the personas' TOTP secret
KNOWN, UNKNOWN = "bob@example.com", "nobody-here@example.com"
# The tokens and nonces that differ on every render, and the email typed back into the form.
VOLATILE = re.compile(rb'(csrfmiddlewaretoken" value="|nonce="|value="|"X-CSRFToken": ")[^"]*"')
TRIES = 5
# Generous: only a gap of a different order (a password hashed for one and not the other) fails.
MAX_TIME_RATIO = 4.0


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()  # the failed sign-ins above must not count against the next test's client


def body(response: Any) -> bytes:
    return VOLATILE.sub(rb"\1...\"", response.content)


def timed(send: Callable[[str], Any], email: str) -> tuple[float, Any]:
    """The median of a few tries (rate limits cleared between them), and the last answer."""
    seconds: list[float] = []
    for _ in range(TRIES):
        cache.clear()
        start = time.perf_counter()
        response = send(email)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), response


def assert_alike(send: Callable[[str], Any]) -> None:
    known_s, known = timed(send, KNOWN)
    unknown_s, unknown = timed(send, UNKNOWN)
    assert known.status_code == unknown.status_code
    assert known.get("Location") == unknown.get("Location")
    assert body(known).replace(KNOWN.encode(), b"@") == body(unknown).replace(UNKNOWN.encode(), b"@")
    ratio = max(known_s, unknown_s) / max(min(known_s, unknown_s), 1e-6)
    print(f"median known {known_s * 1000:.1f} ms, unknown {unknown_s * 1000:.1f} ms")
    assert ratio < MAX_TIME_RATIO, (known_s, unknown_s)


def test_sign_in_does_not_tell_known_from_unknown_emails(world: World) -> None:
    assert_alike(lambda email: Client().post("/accounts/login/", {"login": email, "password": "wrong"}))


def test_password_reset_does_not_tell_known_from_unknown_emails(world: World) -> None:
    assert_alike(lambda email: Client().post("/accounts/password/reset/", {"email": email}))
    # Both got an email (a reset link, or a note that no account uses the address), so the answer
    # on the page is all an attacker sees.
    assert {m.to[0] for m in mail.outbox} == {KNOWN, UNKNOWN}


def _anonymous_session(client: Client) -> str:
    session = client.session
    session["seen"] = True
    session.save()
    client.cookies["sessionid"] = session.session_key or ""
    return str(session.session_key)


def _code(step: int = 0) -> str:
    return str(format_hotp_value(hotp_value(OTP_SECRET, int(time.time()) // 30 + step)))


def test_session_key_changes_at_sign_in(world: World) -> None:
    client = Client()
    before = _anonymous_session(client)
    client.post("/accounts/login/", {"login": KNOWN, "password": PASSWORD})
    assert "_auth_user_id" in client.session
    assert client.session.session_key != before


def test_session_key_changes_at_the_two_factor_step(world: World) -> None:
    client = Client()
    before = _anonymous_session(client)
    response = client.post("/accounts/login/", {"login": "olga@example.com", "password": PASSWORD})
    assert response["Location"].startswith("/accounts/2fa/authenticate/")
    assert "_auth_user_id" not in client.session
    halfway = client.session.session_key
    response = client.post("/accounts/2fa/authenticate/", {"code": _code()})
    assert "_auth_user_id" in client.session, response.content[:500]
    assert len({before, halfway, client.session.session_key}) == 3


def test_the_browser_otp_step_is_rate_limited(world: World) -> None:
    client = Client()
    client.post("/accounts/login/", {"login": "olga@example.com", "password": PASSWORD})
    wrong = next(c for c in ("000000", "111111", "222222") if c not in {_code(s) for s in (-1, 0, 1)})
    for _ in range(20):
        client.post("/accounts/2fa/authenticate/", {"code": wrong})
    response = client.post("/accounts/2fa/authenticate/", {"code": _code()})
    assert "_auth_user_id" not in client.session
    assert response.status_code in (200, 429), response.status_code
