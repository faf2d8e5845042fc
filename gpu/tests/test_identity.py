"""ServiceAccount sign-in of node agents with a stand-in reviewer: the verdict rules, the cache, and the
ingest endpoint's answers. The real TokenReview is tested in tests/gpu_e2e/test_agent_service_account.py."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.test import APIClient

from gpu import app_settings, identity
from gpu.identity import AgentIdentity, AgentReviewUnavailable, AgentTokenRefused, ReviewCache
from gpu.models import Gpu, GpuSample
from gpu.tests.factories import batch, make_node, node_token, series

URL = "/api/v1/ingest/samples"
SA = "system:serviceaccount:gpu-portal-system:gpu-agent"
# What the stand-in reviewer answers per token, and every token it was asked about.
VERDICTS: dict[str, dict[str, Any] | Exception] = {}
ASKED: list[tuple[str, str]] = []


def fake_review(token: str, audience: str) -> dict[str, Any]:
    ASKED.append((token, audience))
    verdict = VERDICTS.get(token, {"authenticated": False, "error": "invalid bearer token"})
    if isinstance(verdict, Exception):
        raise verdict
    return verdict


def jwt(exp: float | None = None, tag: str = "a") -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(data)).rstrip(b"=").decode()

    claims: dict[str, Any] = {"sub": SA, "tag": tag}
    if exp is not None:
        claims["exp"] = exp
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def status(
    node: str | None = "gpu-node-0", *, user: str = SA, audiences: tuple[str, ...] = ("gpu-portal",)
) -> dict[str, Any]:
    extra = {identity.NODE_NAME_EXTRA: [node]} if node else {}
    return {"authenticated": True, "audiences": list(audiences), "user": {"username": user, "extra": extra}}


@pytest.fixture(autouse=True)
def _reviewer() -> Iterator[None]:
    VERDICTS.clear()
    ASKED.clear()
    identity.forget_verdicts()
    with override_settings(
        GPUPORTAL_AGENT_TOKEN_REVIEWER="gpu.tests.test_identity.fake_review",
        GPUPORTAL_AGENT_SERVICE_ACCOUNTS=["gpu-portal-system:gpu-agent"],
        GPUPORTAL_AGENT_TOKEN_AUDIENCE="gpu-portal",
        GPUPORTAL_AGENT_REVIEW_CACHE_S=60,
    ):
        yield
    identity.forget_verdicts()


def test_a_pod_bound_review_names_the_agent_and_its_node() -> None:
    who = identity.judge(status(), audience="gpu-portal", accounts=frozenset({SA}))
    assert who == AgentIdentity(username=SA, node="gpu-node-0", audiences=("gpu-portal",))


@pytest.mark.parametrize(
    ("verdict", "says"),
    [
        ({"error": "[invalid bearer token, service account token has expired]"}, "has expired"),
        ({"authenticated": "true"}, "did not accept"),
        (status(audiences=("other",)), "not for the audience 'gpu-portal'"),
        (status(audiences=()), "not for the audience"),
        (status(user="system:serviceaccount:gp-alpha:default"), "gp-alpha:default is not a node agent"),
        (status(node=None), "names no node"),
    ],
)
def test_reviews_that_are_no_agent_identity_are_refused_with_the_reason(
    verdict: dict[str, Any], says: str
) -> None:
    with pytest.raises(AgentTokenRefused, match=says):
        identity.judge(verdict, audience="gpu-portal", accounts=frozenset({SA}))


def test_a_positive_review_is_reused_and_the_cache_keeps_no_token() -> None:
    token = jwt(time.time() + 3600)
    VERDICTS[token] = status()
    for _ in range(5):
        assert identity.agent_identify(token).node == "gpu-node-0"
    assert len(ASKED) == 1
    assert list(identity._cache._entries) == [identity.token_key(token)]
    assert token not in repr(identity._cache._entries)


def test_the_cache_never_outlives_the_tokens_expiry() -> None:
    token = jwt(time.time() + 2)
    VERDICTS[token] = status()
    assert 0 < identity.cache_seconds(token, time.time()) <= 2
    identity.agent_identify(token)
    (deadline,) = (until for until, _ in identity._cache._entries.values())
    assert deadline <= time.monotonic() + 2


def test_an_already_expired_token_is_not_cached_and_reviewed_each_time() -> None:
    token = jwt(time.time() - 10)
    VERDICTS[token] = status()  # a reviewer that says yes anyway: the cache must still not keep it
    identity.agent_identify(token)
    identity.agent_identify(token)
    assert len(ASKED) == 2
    assert len(identity._cache) == 0


def test_an_entry_is_dropped_at_its_deadline() -> None:
    cache, who = ReviewCache[AgentIdentity](), AgentIdentity(SA, "n", ("gpu-portal",))
    cache.put("k", who, until=100.0, now=40.0)
    assert cache.get("k", now=99.9) == who
    assert cache.get("k", now=100.0) is None
    assert len(cache) == 0


def test_the_cache_is_bounded_and_drops_the_oldest() -> None:
    cache, who = ReviewCache[AgentIdentity](max_entries=3), AgentIdentity(SA, "n", ("gpu-portal",))
    for i in range(5):
        cache.put(f"k{i}", who, until=1000.0, now=0.0)
    assert len(cache) == 3
    assert cache.get("k0", 1.0) is None
    assert cache.get("k4", 1.0) == who


class Clock:
    """identity's monotonic clock, moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = time.monotonic()
        monkeypatch.setattr(time, "monotonic", lambda: self.now)


def test_a_refused_token_is_remembered_for_30_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, token = Clock(monkeypatch), jwt(time.time() + 3600)
    for _ in range(3):
        with pytest.raises(AgentTokenRefused, match="did not accept"):
            identity.agent_identify(token)
    assert len(ASKED) == 1
    clock.now += identity.REFUSAL_CACHE_S + 1
    with pytest.raises(AgentTokenRefused):
        identity.agent_identify(token)
    assert len(ASKED) == 2


def test_an_address_with_30_refusals_in_a_minute_gets_no_review_until_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(monkeypatch)
    for i in range(identity.REFUSALS_PER_MINUTE):
        with pytest.raises(AgentTokenRefused):
            identity.agent_identify(jwt(tag=f"guess-{i}"), address="198.51.100.7")
    good = jwt(time.time() + 3600, tag="good")
    VERDICTS[good] = status()
    with pytest.raises(identity.AgentReviewsThrottled, match="Too many refused tokens"):
        identity.agent_identify(good, address="198.51.100.7")
    assert len(ASKED) == identity.REFUSALS_PER_MINUTE  # the throttled one was never reviewed
    assert identity.agent_identify(good, address="198.51.100.8").node == "gpu-node-0"  # others are not held
    clock.now += 61  # the minute ended: a token not seen before is reviewed again
    fresh = jwt(time.time() + 3600, tag="fresh")
    VERDICTS[fresh] = status()
    assert identity.agent_identify(fresh, address="198.51.100.7").node == "gpu-node-0"


def test_a_cached_identity_is_rechecked_against_the_current_settings() -> None:
    token = jwt(time.time() + 3600)
    VERDICTS[token] = status()
    identity.agent_identify(token)
    other = override_settings(GPUPORTAL_AGENT_SERVICE_ACCOUNTS=["gpu-portal-system:other"])
    with other, pytest.raises(AgentTokenRefused, match="not a node agent"):
        identity.agent_identify(token)


def test_garbage_and_sign_in_off_never_reach_the_api_server() -> None:
    with pytest.raises(AgentTokenRefused, match="Neither a node token"):
        identity.agent_identify("just-a-string")
    off = override_settings(GPUPORTAL_AGENT_SERVICE_ACCOUNTS=[])
    with off, pytest.raises(AgentTokenRefused, match="sign-in is off"):
        identity.agent_identify(jwt())
    assert ASKED == []


def test_no_verdict_is_unavailable_not_refused() -> None:
    token = jwt()
    VERDICTS[token] = ConnectionError("TokenReview failed (Kubernetes API 503)")
    with pytest.raises(AgentReviewUnavailable, match="could not be checked"):
        identity.agent_identify(token)


@pytest.mark.parametrize("entry", ["no-colon", ":name", "ns:", "a:b:c"])
def test_malformed_service_account_settings_are_refused(entry: str) -> None:
    with override_settings(GPUPORTAL_AGENT_SERVICE_ACCOUNTS=[entry]), pytest.raises(ImproperlyConfigured):
        app_settings.agent_service_accounts()


def post(secret: str, body: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client.post(URL, body, format="json")


@pytest.mark.django_db(transaction=True)
def test_the_endpoint_takes_the_node_from_the_token_not_from_the_batch() -> None:
    mine, other = make_node("gpu-node-0"), make_node("gpu-node-1")
    token = jwt(time.time() + 3600)
    VERDICTS[token] = status("gpu-node-0")
    ok = post(token, batch(mine.name, series("GPU-sa-0", 3)))
    assert ok.status_code == 200, ok.content
    assert ok.json() == {"accepted": 3, "duplicates": 0}
    refused = post(token, batch(other.name, series("GPU-sa-1", 3)))
    assert refused.status_code == 403
    assert "signed in for node gpu-node-0" in refused.json()["error"]["message"]
    assert list(Gpu.objects.values_list("node__name", flat=True)) == ["gpu-node-0"]
    assert GpuSample.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_endpoint_answers_401_403_and_503_with_reasons() -> None:
    make_node("gpu-node-0")
    body = batch("gpu-node-0", series("GPU-sa-0", 1))
    bad, unknown, down = jwt(tag="bad"), jwt(tag="unknown"), jwt(tag="down")
    VERDICTS[unknown] = status("gpu-node-9")
    VERDICTS[down] = ConnectionError("no API server")
    for token, code, says in [
        (bad, 401, "did not accept"),
        ("gpt_personal", 401, "Neither a node token"),
        (unknown, 403, "node 'gpu-node-9' is not known"),
        (down, 503, "could not be checked"),
    ]:
        response = post(token, body)
        assert response.status_code == code, (token, response.content)
        assert says in response.json()["error"]["message"]
    assert GpuSample.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_node_tokens_keep_working_next_to_service_accounts() -> None:
    node = make_node("gpu-node-0")
    assert post(node_token(node), batch(node.name, series("GPU-nt-0", 2))).status_code == 200
    assert post("gpn_nothing_real", batch(node.name, series("GPU-nt-0", 1))).status_code == 401
    assert ASKED == []  # node tokens are recognised without Kubernetes


@pytest.mark.django_db(transaction=True)
def test_the_endpoint_answers_429_to_an_address_guessing_tokens() -> None:
    make_node("gpu-node-0")
    body = batch("gpu-node-0", series("GPU-sa-0", 1))
    codes = [post(jwt(tag=f"guess-{i}"), body).status_code for i in range(identity.REFUSALS_PER_MINUTE + 1)]
    assert codes == [401] * identity.REFUSALS_PER_MINUTE + [429]
    throttled = post(jwt(tag="one-more"), body)
    assert throttled.status_code == 429
    assert "Too many refused tokens" in throttled.json()["error"]["message"]
    assert int(throttled["Retry-After"]) > 0
    assert len(ASKED) == identity.REFUSALS_PER_MINUTE
