"""Node agent authentication for the ingest endpoint: `Authorization: Bearer gpn_...`.

A node token is no user: it authenticates a `NodeAgent` principal that may only write telemetry
for its own node. Personal tokens (`gpt_...`) and sessions are not accepted on ingest.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from gpu.models import NodeToken
from gpu.services import NODE_TOKEN_PREFIX, node_token_authenticate


class NodeAgent:
    """The principal behind a node token (DRF needs a `user` with `is_authenticated`)."""

    is_authenticated = True
    is_active = True
    is_staff = False
    pk = None

    def __init__(self, token: NodeToken) -> None:
        self.token = token

    def __str__(self) -> str:
        return f"agent of {self.token.node.name}"


class NodeTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[NodeAgent, NodeToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        keyword, _, secret = header.partition(" ")
        if keyword != self.keyword or not secret:
            return None
        secret = secret.strip()
        token = node_token_authenticate(secret=secret) if secret.startswith(NODE_TOKEN_PREFIX) else None
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked node token.")
        return NodeAgent(token), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsNodeAgent(permissions.BasePermission):
    message = "A node token is required."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, NodeToken)


class NodeTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Names the node agents' bearer scheme in the OpenAPI schema."""

    target_class = "gpu.authentication.NodeTokenAuthentication"
    name = "nodeToken"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        result: dict[str, str] = build_bearer_security_scheme_object(
            header_name="Authorization",
            token_prefix="Bearer",  # noqa: S106 - a scheme name
        )
        return result
