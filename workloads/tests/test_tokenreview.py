"""The TokenReview call the gpu app loads by name: what it sends, and that "no verdict" is not "bad token".
Against the real API server: tests/gpu_e2e/test_agent_service_account.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from workloads.k8s import tokenreview
from workloads.k8s.client import set_client
from workloads.k8s.errors import K8sError, K8sTransientError
from workloads.tests.fakes import FakeKube


class ReviewingKube(FakeKube):
    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        super().__init__()
        self.answer, self.bodies = answer, list[dict[str, Any]]()

    def create(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any] | None:
        self.calls.append(("POST", path))
        self.bodies.append(body)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def kube() -> Iterator[ReviewingKube]:
    fake = ReviewingKube({"status": {"authenticated": True, "audiences": ["gpu-portal"]}})
    set_client(fake)
    try:
        yield fake
    finally:
        set_client(None)


def test_it_asks_for_the_audience_and_returns_the_status(kube: ReviewingKube) -> None:
    assert tokenreview.review_token("jwt", "gpu-portal") == {
        "authenticated": True,
        "audiences": ["gpu-portal"],
    }
    assert kube.calls == [("POST", "/apis/authentication.k8s.io/v1/tokenreviews")]
    assert kube.bodies[0]["spec"] == {"token": "jwt", "audiences": ["gpu-portal"]}


@pytest.mark.parametrize(
    "error", [K8sError(403, "forbidden: cannot create tokenreviews"), K8sTransientError(0, "x")]
)
def test_no_verdict_raises_connection_error_without_the_token(kube: ReviewingKube, error: K8sError) -> None:
    kube.answer = error
    with pytest.raises(ConnectionError, match=f"Kubernetes API {error.status}") as info:
        tokenreview.review_token("secret-jwt", "gpu-portal")
    assert "secret-jwt" not in str(info.value)
