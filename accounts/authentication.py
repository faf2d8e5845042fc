"""DRF authentication by personal token: `Authorization: Bearer gpt_...`."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.audit import client_ip
from accounts.models import ApiToken, User
from accounts.services import TOKEN_PREFIX, token_authenticate


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        keyword, _, secret = header.partition(" ")
        if keyword != self.keyword or not secret.startswith(TOKEN_PREFIX):
            return None  # some other scheme (e.g. a node token) is handled by its own view
        token = token_authenticate(secret=secret.strip(), ip=client_ip(request))
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Names the bearer scheme in the OpenAPI schema."""

    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "personalToken"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        result: dict[str, str] = build_bearer_security_scheme_object(
            header_name="Authorization",
            token_prefix="Bearer",  # noqa: S106 - a scheme name
        )
        return result
