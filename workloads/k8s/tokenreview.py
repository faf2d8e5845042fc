"""Ask the API server who a bearer token belongs to (authentication.k8s.io/v1 TokenReview).

The gpu app signs node agents in with their projected ServiceAccount tokens but may not talk to
Kubernetes itself, so it loads `review_token` by name (setting GPUPORTAL_AGENT_TOKEN_REVIEWER) and
judges the returned status on its own. The portal's identity needs `create` on `tokenreviews`.
"""

from __future__ import annotations

import logging
from typing import Any

from workloads.k8s import paths
from workloads.k8s.client import get_client
from workloads.k8s.errors import K8sError

log = logging.getLogger(__name__)


def review_body(token: str, audience: str) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": [audience]},
    }


def review_token(token: str, audience: str) -> dict[str, Any]:
    """The TokenReview's `status` (authenticated, audiences, user, error).

    Raises ConnectionError when the API server gives no verdict (unreachable, 5xx, or the portal may
    not create TokenReviews): the caller must not read that as "this token is bad".
    """
    try:
        answer = get_client().create(paths.TOKEN_REVIEWS, review_body(token, audience))
    except K8sError as exc:
        # exc.message is the API server's answer about our own request; the token is not in it.
        log.warning("TokenReview failed: %s %s", exc.status, exc.message[:300])
        raise ConnectionError(f"TokenReview failed (Kubernetes API {exc.status})") from None
    status: dict[str, Any] = (answer or {}).get("status") or {}
    return status
