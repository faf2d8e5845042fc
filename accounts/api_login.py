"""Token issuance by password for the CLI (`gpuctl login`).

It goes through allauth's authenticate, so it shares the login-failure rate limit with the web sign-in
and the admin: the 6th wrong password for an account within 5 minutes is refused on every path.
Users with MFA must also send a current TOTP code. This view checks that code itself, so it also
counts wrong codes itself, under the key allauth's own MFA step uses: a code guessed here and one
guessed on the web sign-in fill the same per-account budget.
"""

from __future__ import annotations

from typing import Any

from allauth.account.adapter import get_adapter
from allauth.core import ratelimit
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal.auth import TOTP
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts import services
from accounts.api import TokenCreatedSerializer, TokenCreateSerializer, TokenSerializer
from accounts.models import User


class PasswordTokenSerializer(TokenCreateSerializer):
    email = serializers.EmailField()
    password = serializers.CharField(write_only=True, style={"input_type": "password"})
    otp = serializers.CharField(required=False, allow_blank=True, max_length=12)


def _otp_key(user: User) -> str:
    # allauth.mfa's key for its sign-in step: both paths count wrong codes against one budget.
    return f"mfa-auth-user-{user.pk}"


def _check_otp(request: HttpRequest, user: User, code: str) -> None:
    totp = Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).first()
    if totp is None:
        return
    if not code:  # an empty code guesses nothing, so it does not spend the budget
        raise exceptions.AuthenticationFailed(
            "This account has two-factor authentication: send a current 'otp' code."
        )
    # Every attempt is counted (login_failed: 5 per account per 5 minutes); a right code clears the count.
    if not ratelimit.consume(request, action="login_failed", key=_otp_key(user)):
        raise exceptions.Throttled(
            detail="Too many wrong two-factor codes for this account: wait 5 minutes, then try again."
        )
    if not TOTP(totp).validate_code(code):
        raise exceptions.AuthenticationFailed("Wrong two-factor code: send a current 'otp' code.")
    ratelimit.clear(request, action="login_failed", key=_otp_key(user))


class PasswordTokenView(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "token_create"

    def get_authenticate_header(self, request: Request) -> str:
        return "Bearer"  # so a wrong password answers 401, not 403

    @extend_schema(request=PasswordTokenSerializer, responses={201: TokenCreatedSerializer})
    def post(self, request: Request) -> Response:
        data = PasswordTokenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = data.validated_data
        try:
            user = get_adapter(request).authenticate(
                request, email=values["email"], password=values["password"]
            )
        except ValidationError as exc:  # allauth raises this when the rate limit is hit
            raise exceptions.Throttled(detail=" ".join(exc.messages)) from exc
        if not isinstance(user, User) or not user.is_active:
            raise exceptions.AuthenticationFailed("Wrong email or password.")
        _check_otp(request, user, values.get("otp", ""))
        token, secret = services.token_create(
            user=user,
            name=values["name"],
            scopes=values["scopes"],
            expires_at=values.get("expires_at"),
            request=request,
        )
        return Response(dict(TokenSerializer(token).data, secret=secret), status=status.HTTP_201_CREATED)
