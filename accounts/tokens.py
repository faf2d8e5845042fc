"""Bearer secrets for API tokens and node-agent tokens: how one is minted and how it is stored.

A secret reads `<marker><prefix>_<random>`: the marker says which kind of token it is (so an
authenticator can skip secrets that are not its kind), the prefix is stored in clear to tell a
user's tokens apart, and only a digest of the whole secret is stored.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class Minted:
    """A new secret (shown once, never stored), its public prefix and the digest to store."""

    secret: str
    prefix: str
    digest: str


def digest(secret: str) -> str:
    # The secret has 256 bits of entropy, so a fast hash is safe; a slow KDF would only add latency.
    return hashlib.sha256(secret.encode()).hexdigest()


def mint(marker: str) -> Minted:
    """A fresh secret starting with `marker`: 8 hex characters of prefix, then 32 random bytes."""
    prefix = secrets.token_hex(4)
    secret = f"{marker}{prefix}_{secrets.token_urlsafe(32)}"
    return Minted(secret=secret, prefix=prefix, digest=digest(secret))
