"""Node agent authentication for the ingest endpoint: `Authorization: Bearer <credential>`.

Two credentials, one principal: a node token (`gpn_...`, for agents outside Kubernetes) or the
agent pod's projected ServiceAccount token, checked by a Kubernetes TokenReview (gpu/identity.py).
Either authenticates a `NodeAgent`, no user, that may only write telemetry for its own node.
Personal tokens (`gpt_...`) and sessions are not accepted on ingest.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions, permissions, status
from rest_framework.request import Request

from accounts.audit import client_ip
from gpu import identity
from gpu.identity import AgentIdentity
from gpu.models import Node, NodeToken
from gpu.services import NODE_TOKEN_PREFIX, node_token_authenticate


class ReviewUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The ServiceAccount token could not be checked now; retry."
    default_code = "review_unavailable"


class NodeAgent:
    """The principal of a node agent (DRF needs a `user` with `is_authenticated`); `via` names the
    credential: "node token" or the ServiceAccount's username."""

    is_authenticated = True
    is_active = True
    is_staff = False
    pk = None

    def __init__(self, node: Node, via: str) -> None:
        self.node, self.via = node, via

    def __str__(self) -> str:
        return f"agent of {self.node.name} ({self.via})"


def _bearer(request: Request) -> str | None:
    header = authentication.get_authorization_header(request).decode("latin-1")
    keyword, _, secret = header.partition(" ")
    if keyword != "Bearer":
        return None
    return secret.strip() or None


class NodeTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[NodeAgent, NodeToken] | None:
        secret = _bearer(request)
        if secret is None or not secret.startswith(NODE_TOKEN_PREFIX):
            return None  # not ours: ServiceAccountAuthentication judges it
        token = node_token_authenticate(secret=secret)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked node token.")
        return NodeAgent(token.node, "node token"), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class ServiceAccountAuthentication(authentication.BaseAuthentication):
    """Every bearer credential that is not a node token: a ServiceAccount token, or refused (401)."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[NodeAgent, AgentIdentity] | None:
        secret = _bearer(request)
        if secret is None or secret.startswith(NODE_TOKEN_PREFIX):
            return None
        try:
            who = identity.agent_identify(secret, address=client_ip(request))
        except identity.AgentTokenRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        except identity.AgentReviewsThrottled as exc:
            raise exceptions.Throttled(wait=exc.wait, detail=str(exc)) from None
        except identity.AgentReviewUnavailable as exc:
            raise ReviewUnavailable(str(exc)) from None
        node = identity.agent_node(who)
        if node is None:
            raise exceptions.PermissionDenied(
                f"The token's node {who.node!r} is not known to the portal (not mirrored from the cluster)."
            )
        return NodeAgent(node, who.username), who

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsNodeAgent(permissions.BasePermission):
    message = "A node token or a node agent's ServiceAccount token is required."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, NodeAgent)


def _bearer_scheme() -> dict[str, str]:
    result: dict[str, str] = build_bearer_security_scheme_object(
        header_name="Authorization",
        token_prefix="Bearer",  # noqa: S106 - a scheme name
    )
    return result


class NodeTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Names the node agents' bearer scheme in the OpenAPI schema."""

    target_class = "gpu.authentication.NodeTokenAuthentication"
    name = "nodeToken"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return _bearer_scheme()


class ServiceAccountTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The same bearer header, carrying the agent pod's projected ServiceAccount token."""

    target_class = "gpu.authentication.ServiceAccountAuthentication"
    name = "serviceAccountToken"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return _bearer_scheme()
