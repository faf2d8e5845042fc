"""OpenID Connect sign-in (allauth's openid_connect provider), from the GPUPORTAL_OIDC_* variables.

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

from django.core.exceptions import ImproperlyConfigured

PROVIDER_ID = "oidc"


def socialaccount_providers(
    *, server_url: str, client_id: str, secret: str, secret_file: str, name: str
) -> dict[str, Any]:
    """SOCIALACCOUNT_PROVIDERS for the configured provider, or {} when none is. The secret comes from
    its file when one is named (the file form suits Kubernetes Secrets)."""
    if not server_url:
        return {}
    if secret_file:
        secret = Path(secret_file).read_text().strip()
    return oidc_providers(server_url=server_url, client_id=client_id, secret=secret, name=name)


def form_action_origins(server_url: str) -> list[str]:
    """The provider's origin, where the sign-in form's redirect goes (CSP form-action covers it)."""
    parts = urlsplit(server_url)
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
