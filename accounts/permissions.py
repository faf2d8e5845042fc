"""Scope checks for token-authenticated API calls; sessions act with the user's full rights."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from accounts.choices import TokenScope
from accounts.models import ApiToken


def required_scope(request: Request, view: Any) -> TokenScope:
    if request.method in permissions.SAFE_METHODS:
        return TokenScope.READ
    return TokenScope(getattr(view, "write_scope", TokenScope.SUBMIT))


class TokenScopePermission(permissions.IsAuthenticated):
    message = "This token lacks the scope this action needs."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        scope = required_scope(request, view)
        self.message = f"This token lacks the '{scope}' scope; create a token with it."
        return token.has_scope(scope) or token.has_scope(TokenScope.ADMIN)
