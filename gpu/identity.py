"""Node agents' ServiceAccount sign-in: judge a Kubernetes TokenReview, remember a positive one briefly.

An agent in the node DaemonSet sends its projected ServiceAccount token (audience
`app_settings.agent_token_audience()`). The API server says whose it is (TokenReview, done by the
callable named in `app_settings.agent_token_reviewer()`, since gpu never talks to Kubernetes); this
module accepts it only when it is authenticated for our audience, belongs to one of the configured
agent ServiceAccounts, and names the node its pod runs on (the pod-bound token's node claim,
Kubernetes >= 1.30). Agents post about once a second, so a positive verdict is kept in this process
for at most `agent_review_cache_s()` and never past the token's `exp`, keyed by the token's SHA-256.
A refused token is remembered for REFUSAL_CACHE_S, and an address whose tokens were refused
REFUSALS_PER_MINUTE times in a minute gets no review until the minute ends: each review is a call to
the API server, which a stream of made-up tokens must not turn into load there.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
from django.utils.module_loading import import_string

from gpu import app_settings
from gpu.models import Node
from gpu.selectors import node_list

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
CACHE_MAX = 4096
REFUSAL_CACHE_S = 30.0
REFUSALS_PER_MINUTE = 30
Reviewer = Callable[[str, str], dict[str, Any]]
V = TypeVar("V")


class AgentTokenRefused(Exception):
    """The token is no valid agent identity (answered 401 with this message)."""


class AgentReviewUnavailable(Exception):
    """No verdict could be had from Kubernetes (answered 503: the token may well be fine)."""


class AgentReviewsThrottled(Exception):
    """Too many refused tokens from this address this minute (answered 429, no review asked)."""

    def __init__(self, message: str, wait: float) -> None:
        super().__init__(message)
        self.wait = wait


@dataclass(frozen=True)
class AgentIdentity:
    username: str
    node: str
    audiences: tuple[str, ...]


def looks_like_jwt(token: str) -> bool:
    """Three non-empty base64url segments; anything else is refused without asking the API server."""
    parts = token.split(".")
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    return len(parts) == 3 and all(p and set(p) <= alphabet for p in parts)


def jwt_expiry(token: str) -> float | None:
    """The unverified `exp` claim (Unix time). Only ever used to cache for less, never to accept."""
    try:
        payload = token.split(".")[1]
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error, orjson.JSONDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and math.isfinite(exp) else None


def judge(status: dict[str, Any], *, audience: str, accounts: frozenset[str]) -> AgentIdentity:
    """The agent identity in a TokenReview status, or AgentTokenRefused saying what is wrong (pure)."""
    if status.get("authenticated") is not True:
        why = str(status.get("error") or "not authenticated")[:300]
        raise AgentTokenRefused(f"Kubernetes did not accept the ServiceAccount token: {why}")
    audiences = tuple(str(a) for a in status.get("audiences") or ())
    if audience not in audiences:
        raise AgentTokenRefused(f"The token is not for the audience {audience!r}; project it for that one.")
    user = status.get("user") or {}
    username = str(user.get("username") or "")
    if username not in accounts:
        raise AgentTokenRefused(f"{username or 'This identity'} is not a node agent ServiceAccount here.")
    nodes = (user.get("extra") or {}).get(NODE_NAME_EXTRA) or []
    if len(nodes) != 1 or not isinstance(nodes[0], str) or not nodes[0]:
        raise AgentTokenRefused("The token names no node: send a pod's projected token (Kubernetes >= 1.30).")
    return AgentIdentity(username=username, node=nodes[0], audiences=audiences)


class ReviewCache(Generic[V]):
    """Verdicts by token digest, each until its own deadline (monotonic); bounded in size."""

    def __init__(self, max_entries: int = CACHE_MAX) -> None:
        self.max_entries = max_entries
        self._entries: dict[str, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, now: float) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] <= now:
                del self._entries[key]
                return None
            return entry[1] if entry else None

    def put(self, key: str, identity: V, until: float, now: float) -> None:
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
            while len(self._entries) >= self.max_entries:
                del self._entries[next(iter(self._entries))]  # the oldest insertion goes first
            self._entries[key] = (until, identity)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class RefusalCounter:
    """Refused tokens per client address in fixed one-minute windows (monotonic): a ReviewCache of
    (count, window end) by address, so bounded the same way."""

    def __init__(self, max_entries: int = CACHE_MAX) -> None:
        self._windows: ReviewCache[tuple[int, float]] = ReviewCache(max_entries)

    def wait(self, address: str, now: float) -> float:
        """Seconds until this address may be reviewed again (0: now)."""
        count, end = self._windows.get(address, now) or (0, now)
        return end - now if count >= REFUSALS_PER_MINUTE else 0.0

    def add(self, address: str, now: float) -> None:
        # Two refusals at once may count as one: a soft limit, it only needs to be near.
        count, end = self._windows.get(address, now) or (0, now + 60)
        self._windows.put(address, (count + 1, end), end, now)

    def clear(self) -> None:
        self._windows.clear()


_cache: ReviewCache[AgentIdentity] = ReviewCache()
_refused: ReviewCache[str] = ReviewCache()
_refusals = RefusalCounter()


def forget_verdicts() -> None:
    """Drop every remembered verdict and count (settings changed; tests)."""
    _cache.clear()
    _refused.clear()
    _refusals.clear()


def token_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def cache_seconds(token: str, wall_now: float) -> float:
    """How long a positive verdict may be reused: the configured time, cut at the token's expiry."""
    ttl = app_settings.agent_review_cache_s()
    exp = jwt_expiry(token)
    return min(ttl, exp - wall_now) if exp is not None else ttl


def _review(token: str, audience: str) -> dict[str, Any]:
    reviewer: Reviewer = import_string(app_settings.agent_token_reviewer())
    try:
        return reviewer(token, audience)
    except OSError as exc:
        raise AgentReviewUnavailable(f"The ServiceAccount token could not be checked now ({exc}).") from None


def _still_allowed(identity: AgentIdentity, *, audience: str, accounts: frozenset[str]) -> bool:
    # Settings may change while a verdict is cached; the cache only saves the review, not the policy.
    return identity.username in accounts and audience in identity.audiences


def agent_identify(
    token: str, *, address: str | None = None, cache: ReviewCache[AgentIdentity] | None = None
) -> AgentIdentity:
    """Who sent this ServiceAccount token (from `address`): reviewed by Kubernetes, or a recent
    verdict on it."""
    cache = cache or _cache
    accounts, audience = app_settings.agent_service_accounts(), app_settings.agent_token_audience()
    if not accounts:
        raise AgentTokenRefused("Not a node token, and ServiceAccount sign-in is off on this portal.")
    if not looks_like_jwt(token):
        raise AgentTokenRefused("Neither a node token (gpn_...) nor a ServiceAccount token (a JWT).")
    key, now = token_key(token), time.monotonic()
    identity = cache.get(key, now)
    if identity is not None and _still_allowed(identity, audience=audience, accounts=accounts):
        return identity
    refused = _refused.get(key, now)
    if refused is not None:
        raise AgentTokenRefused(refused)
    wait = _refusals.wait(address, now) if address else 0.0
    if wait > 0:
        raise AgentReviewsThrottled(
            f"Too many refused tokens from {address}; try again in {math.ceil(wait)} s.", wait
        )
    try:
        identity = judge(_review(token, audience), audience=audience, accounts=accounts)
    except AgentTokenRefused as exc:
        _refused.put(key, str(exc), now + REFUSAL_CACHE_S, now)
        if address:
            _refusals.add(address, now)
        raise
    ttl = cache_seconds(token, time.time())
    if ttl > 0:
        cache.put(key, identity, now + ttl, now)
    return identity


def agent_node(identity: AgentIdentity) -> Node | None:
    """The mirrored, live Node the identity's token is bound to (None: not known to the portal)."""
    return node_list().filter(name=identity.node).first()
