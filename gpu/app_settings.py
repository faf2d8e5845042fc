"""The gpu app's tunables, read from Django settings at each call (so overridden settings apply). Each
is declared, with its default, in portal/settings/environment.py."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from plugin import names


def raw_retention_days() -> int:
    """Days of raw samples kept; older daily partitions are dropped whole."""
    return int(settings.GPU_RAW_RETENTION_DAYS)


def partitions_ahead_days() -> int:
    return int(settings.GPU_PARTITIONS_AHEAD_DAYS)


def rollup_minute_retention_days() -> int:
    return int(settings.GPU_ROLLUP_MINUTE_RETENTION_DAYS)


def rollup_hour_retention_days() -> int:
    return int(settings.GPU_ROLLUP_HOUR_RETENTION_DAYS)


def max_batch() -> int:
    """Samples per ingest request (the agent contract's limit)."""
    return int(settings.GPU_INGEST_MAX_SAMPLES)


def max_body_bytes() -> int:
    return int(settings.GPU_INGEST_MAX_BYTES)


def max_clock_skew_s() -> int:
    """A sample stamped further than this in the future is refused (agent clock wrong)."""
    return int(settings.GPU_INGEST_MAX_SKEW_S)


def push_interval_s() -> float:
    """About one frame per view and per group in this many seconds (broadcast.Coalescer: a 1 Hz source
    passes as is, a faster one is merged down to at most 1.25 frames per interval)."""
    return float(settings.GPU_PUSH_INTERVAL_MS) / 1000.0


def metrics_token() -> str:
    """Bearer token for /metrics; empty means staff sessions only."""
    return str(settings.GPU_METRICS_TOKEN)


def plugin_config_namespace() -> str:
    return str(settings.GPU_PLUGIN_CONFIG_NAMESPACE)


def plugin_config_name() -> str:
    """The ConfigMap the node DaemonSet mounts (docs/plugin.md, the chart's templates/node.yaml)."""
    return names.SHARING_CONFIG_NAME


def plugin_config_key() -> str:
    return names.SHARING_CONFIG_KEY


def agent_token_audience() -> str:
    """The audience node agents project their ServiceAccount tokens for (and TokenReviews ask for)."""
    return str(settings.GPUPORTAL_AGENT_TOKEN_AUDIENCE)


def agent_service_accounts() -> frozenset[str]:
    """Usernames (`system:serviceaccount:<ns>:<name>`) of the ServiceAccounts node agents run as, from
    GPUPORTAL_AGENT_SERVICE_ACCOUNTS ("namespace:name" each); empty turns ServiceAccount sign-in off."""
    entries: list[str] = list(settings.GPUPORTAL_AGENT_SERVICE_ACCOUNTS or [])
    accounts = set()
    for entry in entries:
        namespace, _, name = entry.strip().partition(":")
        if not namespace or not name or ":" in name:
            raise ImproperlyConfigured(f"GPUPORTAL_AGENT_SERVICE_ACCOUNTS: {entry!r} is not namespace:name")
        accounts.add(f"system:serviceaccount:{namespace}:{name}")
    return frozenset(accounts)


def agent_token_reviewer() -> str:
    """Dotted path of `(token, audience) -> TokenReview status`; gpu never imports workloads, so the
    Kubernetes call is named here (like AUTHENTICATION_BACKENDS) and loaded when needed."""
    return str(settings.GPUPORTAL_AGENT_TOKEN_REVIEWER)


def agent_review_cache_s() -> float:
    """How long a positive TokenReview is reused (never past the token's own expiry)."""
    return float(settings.GPUPORTAL_AGENT_REVIEW_CACHE_S)


def health_clean_seconds() -> float:
    """A GPU made unhealthy (or degraded) by telemetry returns to service by itself after this many
    seconds with no new critical XID or ECC error, at its next clean sample
    (GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS)."""
    return float(settings.GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS)


def node_token_days() -> int:
    """Days a new node agent token works."""
    return int(settings.GPUPORTAL_NODE_TOKEN_DAYS)
