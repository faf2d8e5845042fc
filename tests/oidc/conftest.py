"""A real OpenID Connect provider process (tests/oidc/provider) for the sign-in tests.

Built by deploy/setup/oidc-provider.sh (cached); a missing Go toolchain or a failed build fails the
tests that need it. The provider knows one client; tests queue the user it signs in next.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from portal.settings.oidc import oidc_providers

REPO = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "gpu-portal", "test-secret-not-for-production"


@dataclass(frozen=True)
class Provider:
    issuer: str
    control: str

    def queue_user(self, sub: str, email: str, *, verified: bool = True, audience: str = "") -> None:
        body = {"sub": sub, "email": email, "email_verified": verified, "name": sub, "audience": audience}
        requests.post(f"{self.control}/users", json=body, timeout=5).raise_for_status()

    def providers_setting(self) -> dict[str, Any]:
        """SOCIALACCOUNT_PROVIDERS as the portal's settings build it, for this provider."""
        return oidc_providers(
            server_url=self.issuer, client_id=CLIENT_ID, secret=CLIENT_SECRET, name="Lab SSO"
        )


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[Provider]:
    build = subprocess.run(
        ["bash", str(REPO / "deploy/setup/oidc-provider.sh")], capture_output=True, text=True, check=False
    )
    if build.returncode != 0:
        pytest.fail(f"OIDC provider build failed:\n{build.stderr[-2000:]}", pytrace=False)
    binary = build.stdout.strip().splitlines()[-1]
    proc = subprocess.Popen(
        [binary, "-client-id", CLIENT_ID, "-client-secret", CLIENT_SECRET],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    try:
        yield Provider(issuer=ready["issuer"], control=ready["control"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
