"""OpenID Connect sign-in (allauth's openid_connect provider), configured from the environment.

Off unless GPUPORTAL_OIDC_SERVER_URL is set. The provider's ID token must name this portal's client
as its audience (allauth checks it). A provider user whose email the provider marks verified signs
in to the local account with that email (linked on first use); an unverified email never links.
New accounts from the provider are made only when GPUPORTAL_OIDC_ALLOW_SIGNUPS is on, since
operators usually make accounts (and project memberships) themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

PROVIDER_ID = "oidc"


def _secret(env: environ.Env) -> str:
    path = env.str("GPUPORTAL_OIDC_CLIENT_SECRET_FILE", default="")
    if path:
        return Path(path).read_text().strip()
    return str(env.str("GPUPORTAL_OIDC_CLIENT_SECRET", default=""))


def socialaccount_providers(env: environ.Env) -> dict[str, Any]:
    """SOCIALACCOUNT_PROVIDERS from the GPUPORTAL_OIDC_* environment, or {} when none is set."""
    server_url = env.str("GPUPORTAL_OIDC_SERVER_URL", default="")
    if not server_url:
        return {}
    return oidc_providers(
        server_url=server_url,
        client_id=env.str("GPUPORTAL_OIDC_CLIENT_ID", default=""),
        secret=_secret(env),
        name=env.str("GPUPORTAL_OIDC_NAME", default="single sign-on"),
    )


def form_action_origins(env: environ.Env) -> list[str]:
    """The provider's origin, where the sign-in form's redirect goes (CSP form-action covers it)."""
    parts = urlsplit(env.str("GPUPORTAL_OIDC_SERVER_URL", default=""))
    return [f"{parts.scheme}://{parts.netloc}"] if parts.scheme and parts.netloc else []


def oidc_providers(*, server_url: str, client_id: str, secret: str, name: str) -> dict[str, Any]:
    """allauth's settings for one OIDC provider, found through its discovery document."""
    if not client_id or not secret:
        raise ImproperlyConfigured(
            "GPUPORTAL_OIDC_SERVER_URL is set: also set GPUPORTAL_OIDC_CLIENT_ID and "
            "GPUPORTAL_OIDC_CLIENT_SECRET (or GPUPORTAL_OIDC_CLIENT_SECRET_FILE)."
        )
    app = {
        "provider_id": PROVIDER_ID,
        "name": name,
        "client_id": client_id,
        "secret": secret,
        "settings": {"server_url": server_url},
    }
    return {
        "openid_connect": {
            "APPS": [app],
            "OAUTH_PKCE_ENABLED": True,
            "EMAIL_AUTHENTICATION": True,
        }
    }
