"""Every environment variable the portal reads, declared once: name, type, default and what it does.

Each declaration reads its variable through django-environ, once, while the settings load (the
healthchecks settings' `envint` is the model) and names the value. An UPPERCASE name is the Django
setting of that name: the apps read it through `<app>/app_settings.py`, and tests override it with
the `settings` fixture. A lowercase name is an input the other settings modules build on
(DATABASE_URL becomes DATABASES). Nothing else on the portal side reads the process environment,
and the operator guide's settings tables are these help texts (`make settings-docs` writes them;
tests/test_environment.py fails when a table, a declaration or a read disagree).

Why one file rather than one per app: the environment is read while the settings load, before any
app is imported, and the apps sit below `portal` in the layering, so they cannot declare what the
settings read. One file also keeps visible the order in which one value decides another's default
(production mode decides several).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import environ
from django.core.exceptions import ImproperlyConfigured

from plugin import contract, names

_T = TypeVar("_T")
BASE_DIR = Path(__file__).resolve().parents[2]
_env = environ.Env()


@dataclass(frozen=True)
class Variable:
    """One declared variable, as the operator guide lists it."""

    name: str
    default: str  # as the guide shows it
    help: str
    table: str


declared: dict[str, Variable] = {}


def shown(default: object) -> str:
    """A default as the guide's tables show it."""
    if isinstance(default, bool):
        return "on" if default else "off"
    if default is None or default == "" or default == [] or default == {}:
        return "empty"
    if isinstance(default, float):
        return f"{default:g}"
    if isinstance(default, str | Path):
        return f"`{default}`"
    return str(default)


@dataclass(frozen=True)
class Table:
    """One of the operator guide's settings tables: the variables declared through it, in order."""

    name: str

    def read(
        self,
        name: str,
        default: _T,
        help: str,
        *,
        cast: Callable[[str], _T] | None = None,
        shown_as: str | None = None,
    ) -> _T:
        """Declare `name` and read it, cast to its default's type unless `cast` says otherwise
        (django-environ's casts: a bool takes 1/0, true/false, on/off; a list, comma-separated words).
        `shown_as` says the default in words where the settings derive it."""
        if name in declared:
            raise ImproperlyConfigured(f"{name} is declared twice in portal/settings/environment.py.")
        declared[name] = Variable(name, shown(default) if shown_as is None else shown_as, help, self.name)
        try:
            value: _T = _env.get_value(name, cast=cast or type(default), default=default)
        except ValueError as exc:  # a number that is not one: say which variable
            raise ImproperlyConfigured(f"{name}: {exc}") from None
        return value


server = Table("server")
sign_in = Table("sign-in")
cluster = Table("cluster")
jobs = Table("jobs")
telemetry = Table("telemetry")
rightsizing = Table("right-sizing")

# Production mode: GPUPORTAL_PRODUCTION=1 or DEBUG=0, either one. `manage.py demo` sets GPUPORTAL_DEMO:
# embedded defaults, but the pages users see (404, 500), not Django's debug pages, which show the URL
# configuration and settings to anyone.
_production_flag = server.read(
    "GPUPORTAL_PRODUCTION",
    False,
    "production: the hardened settings; a missing secret key, host list or Redis stops the start",
)
DEMO = server.read(
    "GPUPORTAL_DEMO",
    False,
    "the demo (`manage.py demo` sets it): the portal's own error pages, without the production checks",
)
DEBUG = server.read(
    "DEBUG",
    not (_production_flag or DEMO),
    "Django's debug pages; `DEBUG=0` alone also means production",
    shown_as="on; off with `GPUPORTAL_PRODUCTION` or `GPUPORTAL_DEMO`",
)
# Debug off means a real deployment, flag or not (the demo aside): a half-hardened server (wildcard
# hosts, a known secret key, cookies without Secure) is worse than one that refuses to start.
PRODUCTION = _production_flag or not (DEBUG or DEMO)
if _production_flag and (DEBUG or DEMO):
    raise ImproperlyConfigured("GPUPORTAL_PRODUCTION=1 with DEBUG or GPUPORTAL_DEMO on: pick one.")

secret_key = server.read(
    "SECRET_KEY",
    "",
    "a long random secret; production needs it or `SECRET_KEY_FILE`",
    shown_as="a fixed development key",
)
secret_key_file = server.read(
    "SECRET_KEY_FILE",
    "",
    "a file holding the secret key (suits Kubernetes Secrets); wins over `SECRET_KEY`",
)


def _secret_key() -> str:
    if secret_key_file:
        return Path(secret_key_file).read_text(encoding="utf-8").strip()
    if secret_key:
        return secret_key
    if PRODUCTION:
        raise ImproperlyConfigured("Set SECRET_KEY or SECRET_KEY_FILE in production.")
    return "dev-only-insecure-key-" + "x" * 40


SECRET_KEY = _secret_key()
ALLOWED_HOSTS: list[str] = server.read(
    "ALLOWED_HOSTS",
    [] if PRODUCTION else ["*"],
    "comma-separated host names; production needs them",
    shown_as="`*`; none in production",
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("Set ALLOWED_HOSTS in production (comma separated).")
CSRF_TRUSTED_ORIGINS: list[str] = server.read(
    "CSRF_TRUSTED_ORIGINS", [], "comma-separated origins, e.g. `https://portal.example.org`"
)
# The client's address is read that many hops from the right of X-Forwarded-For; with 0 the header is
# ignored, since any client can write it. The API throttle (DRF) and the login rate limits (allauth)
# both read this one number.
TRUSTED_PROXIES = server.read(
    "GPUPORTAL_TRUSTED_PROXIES",
    0,
    "how many of your reverse proxies append to `X-Forwarded-For` (see *Security*)",
)
if TRUSTED_PROXIES < 0:
    raise ImproperlyConfigured("GPUPORTAL_TRUSTED_PROXIES is a count of proxies: 0 or more.")
trust_x_forwarded_proto = server.read(
    "TRUST_X_FORWARDED_PROTO", False, "behind a TLS-terminating proxy that sets `X-Forwarded-Proto`"
)
SECURE_HSTS_SECONDS = server.read(
    "SECURE_HSTS_SECONDS",
    31536000 if PRODUCTION else 0,
    "the `Strict-Transport-Security` max-age",
    shown_as="31536000 (a year) in production, else 0",
)
SECURE_SSL_REDIRECT = server.read(
    "SECURE_SSL_REDIRECT", PRODUCTION, "redirect http to https", shown_as="on in production"
)
SESSION_COOKIE_AGE = server.read("SESSION_COOKIE_AGE", 12 * 3600, "seconds a sign-in lasts")
log_level = server.read("LOG_LEVEL", "INFO", "the root logger's level")

# Datastores (portal/settings/datastores.py builds on these).
VAR_DIR = server.read(
    "GPUPORTAL_VAR_DIR",
    BASE_DIR / "var",
    "where the embedded demo keeps its SQLite file",
    shown_as="`var/` in the checkout",
)
database_url = server.read(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'portal.sqlite3'}",
    "`postgres://user:pass@host:5432/db`",
    shown_as="an SQLite file in `GPUPORTAL_VAR_DIR` (the embedded demo)",
)
REDIS_URL = server.read(
    "REDIS_URL",
    "",
    "Celery broker, Channels layer (pub/sub) and cache; production needs it",
    shown_as="none: in-process broker, layer and cache",
)
if PRODUCTION and not REDIS_URL:
    raise ImproperlyConfigured("Set REDIS_URL in production (Celery broker, channel layer, cache).")
DB_POOL_SIZE = server.read(
    "DB_POOL_SIZE",
    0,
    "Postgres connections pooled per process (psycopg_pool); 0 is a connection per request (see below)",
)


def _role_guess() -> str:
    """The process's part as its command line says it (python -m uvicorn: the package)."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else Path("python")
    if program.name == "__main__.py":
        program = program.parent
    words = [Path(arg).name for arg in sys.argv] if program.name != "pytest" else []  # pytest -k worker
    return next(
        (w for w in ("worker", "beat", "controller", "provisioner", "demo") if w in words), program.name
    )


ROLE = server.read(
    "GPUPORTAL_ROLE",
    _role_guess(),
    "the process's part (`web`, `worker`, `beat`, `controller`, `provisioner`), sent to Postgres as "
    "`application_name=gpuportal-<role>` (see below)",
    shown_as="guessed from the command line",
)[:40]
# Processes that work in a loop of short units (a Celery task, a controller tick) keep their
# connection between units: a new Postgres connection is a new server process, and a worker opened
# about 5 a job when every task made its own. Web processes pool instead (datastores.py).
KEEPS_CONNECTIONS = ("worker", "provisioner", "controller")
conn_max_age = server.read(
    "CONN_MAX_AGE",
    300 if ROLE in KEEPS_CONNECTIONS else 0,
    "seconds a process keeps its Postgres connection between units of work; ignored with a pool (see below)",
    shown_as="300 for the workers, the provisioner and the controller, else 0",
)
# Unacked tasks of a killed worker come back after this (Redis transport); keep it above the
# longest task and short enough that a lost worker's work is redone quickly.
celery_visibility_timeout = server.read(
    "GPUPORTAL_CELERY_VISIBILITY_TIMEOUT",
    300,
    "seconds after which a task a lost worker took is delivered again",
)
GPUPORTAL_WORKER_ALIVE_FILE = server.read(
    "GPUPORTAL_WORKER_ALIVE_FILE",
    "",
    "a file a Celery worker touches while it takes work, read by the liveness probe (the chart sets it)",
)
EMAIL_BACKEND = server.read(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if PRODUCTION
    else "django.core.mail.backends.console.EmailBackend",
    "mail for verification, password reset and job notices",
    shown_as="SMTP in production, else the console",
)
EMAIL_HOST = server.read("EMAIL_HOST", "localhost", "the SMTP server")
EMAIL_PORT = server.read("EMAIL_PORT", 25, "its port")
DEFAULT_FROM_EMAIL = server.read(
    "DEFAULT_FROM_EMAIL", "gpu-portal@localhost", "the sender of the portal's mail"
)

# Sign-in (portal/settings/auth.py; OpenID Connect in portal/settings/oidc.py).
ACCOUNT_ALLOW_SIGNUPS = sign_in.read(
    "GPUPORTAL_ALLOW_SIGNUPS", False, "anyone may make an account (email verification is mandatory)"
)
MFA_TOTP_ISSUER = sign_in.read(
    "GPUPORTAL_MFA_ISSUER", "GPU portal", "the issuer authenticator apps show beside the code"
)
oidc_server_url = sign_in.read(
    "GPUPORTAL_OIDC_SERVER_URL",
    "",
    "the issuer, e.g. `https://sso.example.org/realms/lab` (its `/.well-known/openid-configuration` is "
    "read); empty: no single sign-on",
)
oidc_client_id = sign_in.read(
    "GPUPORTAL_OIDC_CLIENT_ID", "", "the client ID; ID tokens for any other audience are refused"
)
oidc_client_secret = sign_in.read("GPUPORTAL_OIDC_CLIENT_SECRET", "", "the client secret")
oidc_client_secret_file = sign_in.read(
    "GPUPORTAL_OIDC_CLIENT_SECRET_FILE",
    "",
    "a file holding the client secret (suits Kubernetes Secrets); wins over `GPUPORTAL_OIDC_CLIENT_SECRET`",
)
oidc_name = sign_in.read("GPUPORTAL_OIDC_NAME", "single sign-on", "the button's label on the sign-in page")
SOCIALACCOUNT_ALLOW_SIGNUPS = sign_in.read(
    "GPUPORTAL_OIDC_ALLOW_SIGNUPS",
    False,
    "also make accounts for provider users the portal does not know",
)

# Kubernetes (read by workloads/app_settings.py and gpu/app_settings.py).
GPUPORTAL_KUBECONFIG = cluster.read(
    "GPUPORTAL_KUBECONFIG", "", "kubeconfig of the cluster; empty: the pod's in-cluster ServiceAccount"
)
GPUPORTAL_NAMESPACE_PREFIX = cluster.read(
    "GPUPORTAL_NAMESPACE_PREFIX", "gp-", "project namespaces are this prefix and the project's slug"
)
GPUPORTAL_PROJECT_UID_BASE = cluster.read(
    "GPUPORTAL_PROJECT_UID_BASE",
    100_000,
    "a project's pods run as UID and GID this base plus the project's id (see *Security*)",
)


def _tenant_role_bindings(text: str) -> dict[str, list[str]]:
    """GPUPORTAL_TENANT_ROLE_BINDINGS: JSON {"<ClusterRole>": ["<namespace>:<serviceaccount>", ...]}."""
    try:
        parsed = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"GPUPORTAL_TENANT_ROLE_BINDINGS is not JSON: {exc}") from None
    ok = isinstance(parsed, dict) and all(
        isinstance(v, list) and all(isinstance(ref, str) and ref.count(":") == 1 for ref in v)
        for v in parsed.values()
    )
    if not ok:
        raise ImproperlyConfigured(
            'GPUPORTAL_TENANT_ROLE_BINDINGS must look like {"role": ["namespace:serviceaccount", ...]}.'
        )
    return {str(role): list(refs) for role, refs in parsed.items()}


GPUPORTAL_TENANT_ROLE_BINDINGS: dict[str, list[str]] = cluster.read(
    "GPUPORTAL_TENANT_ROLE_BINDINGS",
    {},
    'JSON `{"<ClusterRole>": ["<namespace>:<serviceaccount>", ...]}`: every project namespace gets these '
    "RoleBindings (the chart sets it)",
    cast=_tenant_role_bindings,
)
GPUPORTAL_PROVISIONER_QUEUE = cluster.read(
    "GPUPORTAL_PROVISIONER_QUEUE",
    "",
    "the Celery queue of a separate worker that writes namespaces as the provisioner identity (the "
    "chart sets it); empty: the worker writes them itself",
)
GPUPORTAL_LEASE_NAMESPACE = cluster.read(
    "GPUPORTAL_LEASE_NAMESPACE", "default", "the namespace of the controller's leader Lease"
)
GPU_PLUGIN_CONFIG_NAMESPACE = cluster.read(
    "GPU_PLUGIN_CONFIG_NAMESPACE",
    names.SHARING_CONFIG_NAMESPACE,
    "the namespace of the device plugin's sharing ConfigMap (the chart's node namespace)",
)
GPUPORTAL_AGENT_SERVICE_ACCOUNTS: list[str] = cluster.read(
    "GPUPORTAL_AGENT_SERVICE_ACCOUNTS",
    [],
    "comma-separated `namespace:name` of the node agents' ServiceAccounts; empty: node tokens only",
)
GPUPORTAL_AGENT_TOKEN_AUDIENCE = cluster.read(
    "GPUPORTAL_AGENT_TOKEN_AUDIENCE", "gpu-portal", "the audience node agents project their tokens for"
)
GPUPORTAL_AGENT_REVIEW_CACHE_S = cluster.read(
    "GPUPORTAL_AGENT_REVIEW_CACHE_S",
    60,
    "seconds a positive TokenReview is reused in one web process (never past the token's expiry)",
)
GPUPORTAL_NODE_TOKEN_DAYS = cluster.read(
    "GPUPORTAL_NODE_TOKEN_DAYS",
    90,
    "days a node agent's token works (rotate it in the admin before then: Node tokens, Rotate)",
)
GPUPORTAL_JOB_SIMULATION = cluster.read(
    "GPUPORTAL_JOB_SIMULATION",
    False,
    "copy the local cluster's simulated run time and exit code into pods: the demo and tests only",
)
GPUPORTAL_REAL_NODE_PLACEMENT = cluster.read(
    "GPUPORTAL_REAL_NODE_PLACEMENT",
    False,
    "jobs may ask for the local cluster's real node (deploy/localcluster/README.md): the demo and tests only",
)

# Jobs (workloads/app_settings.py).
GPUPORTAL_JOB_TTL_SECONDS = jobs.read(
    "GPUPORTAL_JOB_TTL_SECONDS",
    7 * 24 * 3600,
    "a finished Kubernetes Job and its pod are removed this long after the end; the portal keeps the "
    "record (see *Finished jobs and TTL*)",
)
GPUPORTAL_JOB_LOG_TAIL_BYTES = jobs.read(
    "GPUPORTAL_JOB_LOG_TAIL_BYTES",
    256 * 1024,
    "how much of a finished job's log the portal keeps (its end)",
)
GPUPORTAL_JOB_BACKOFF_LIMIT = jobs.read(
    "GPUPORTAL_JOB_BACKOFF_LIMIT", 0, "the `backoffLimit` of every Kubernetes Job: pod retries"
)
GPUPORTAL_MAX_GPUS_PER_JOB = jobs.read(
    "GPUPORTAL_MAX_GPUS_PER_JOB", 8, "the most whole GPUs one job (or one worker of a job) may ask for"
)
GPUPORTAL_MAX_WORKERS_PER_JOB = jobs.read(
    "GPUPORTAL_MAX_WORKERS_PER_JOB", 16, "the most workers (pods, one node each at most) one job may have"
)
GPUPORTAL_MPS_SLICES_PER_GPU = jobs.read(
    "GPUPORTAL_MPS_SLICES_PER_GPU",
    4,
    "slices per shared GPU where a job's GPU cannot be told (queue and accounting; see *GPUs and nodes*)",
)
GPUPORTAL_NAMESPACE_MAX_JOBS = jobs.read(
    "GPUPORTAL_NAMESPACE_MAX_JOBS",
    10_000,
    "`count/jobs.batch` of every project's ResourceQuota (see *Jobs and the queue*)",
)
GPUPORTAL_SWEEP_SECONDS = jobs.read(
    "GPUPORTAL_SWEEP_SECONDS",
    30,
    "the interval of the sweep, which admits, resends and re-reads every unfinished job (see *Outages*)",
)
GPUPORTAL_RECONCILE_EXPIRES_SECONDS: float | None = jobs.read(
    "GPUPORTAL_RECONCILE_EXPIRES_SECONDS",
    None,
    "a queued reconcile message older than this is dropped unrun",
    cast=float,
    shown_as="four sweep intervals, at least 60",
)
GPUPORTAL_OUTBOX_RETRY_SECONDS = jobs.read(
    "GPUPORTAL_OUTBOX_RETRY_SECONDS",
    20.0,
    "a reconcile request without progress this long is sent again",
)
GPUPORTAL_JOB_NO_POD_SECONDS = jobs.read(
    "GPUPORTAL_JOB_NO_POD_SECONDS",
    120,
    "a running job whose Kubernetes Job shows no pod and no outcome this long becomes *unknown*",
)
GPUPORTAL_JOB_UNKNOWN_SECONDS = jobs.read(
    "GPUPORTAL_JOB_UNKNOWN_SECONDS",
    600,
    "an unknown job with no evidence this long is *lost* and gives its quota back",
)
GPUPORTAL_LOG_STREAMS_PER_USER = jobs.read(
    "GPUPORTAL_LOG_STREAMS_PER_USER",
    8,
    "followed log streams one user may hold open per web process (the next one answers 429)",
)
GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS = jobs.read(
    "GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS", 600.0, "a followed log with no output for this long ends"
)
GPUPORTAL_LOG_FOLLOW_POLL_SECONDS = jobs.read(
    "GPUPORTAL_LOG_FOLLOW_POLL_SECONDS",
    3.0,
    "how often a silent followed log re-reads its job: started yet, ended?",
)
GPUPORTAL_WEBHOOK_ALLOW_PRIVATE = jobs.read(
    "GPUPORTAL_WEBHOOK_ALLOW_PRIVATE",
    False,
    "project webhooks may call private addresses, and plain http",
)

# Telemetry and GPU health (gpu/app_settings.py).
GPU_RAW_RETENTION_DAYS = telemetry.read(
    "GPU_RAW_RETENTION_DAYS", 2, "days of raw samples kept; older daily partitions are dropped whole"
)
GPU_PARTITIONS_AHEAD_DAYS = telemetry.read(
    "GPU_PARTITIONS_AHEAD_DAYS", 2, "daily partitions made ahead of time"
)
GPU_ROLLUP_MINUTE_RETENTION_DAYS = telemetry.read(
    "GPU_ROLLUP_MINUTE_RETENTION_DAYS", 30, "days of minute rollups kept"
)
GPU_ROLLUP_HOUR_RETENTION_DAYS = telemetry.read(
    "GPU_ROLLUP_HOUR_RETENTION_DAYS", 365, "days of hour rollups kept"
)
GPU_PUSH_INTERVAL_MS = telemetry.read(
    "GPU_PUSH_INTERVAL_MS", 1000, "about one live frame per page and GPU group in this many milliseconds"
)
GPU_METRICS_TOKEN = telemetry.read(
    "GPU_METRICS_TOKEN", "", "bearer token for `/metrics`; empty: staff sessions only (see *Metrics*)"
)
GPU_INGEST_MAX_SAMPLES = telemetry.read(
    "GPU_INGEST_MAX_SAMPLES",
    contract.MAX_SAMPLES_PER_BATCH,
    "samples per ingest batch (the agent contract's limit, docs/telemetry-contract.md)",
)
GPU_INGEST_MAX_BYTES = telemetry.read(
    "GPU_INGEST_MAX_BYTES", 16 * 1024 * 1024, "the largest ingest request body, in bytes"
)
GPU_INGEST_MAX_SKEW_S = telemetry.read(
    "GPU_INGEST_MAX_SKEW_S", 300, "a sample stamped further than this in the future is refused (seconds)"
)
GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS = telemetry.read(
    "GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS",
    300.0,
    "a GPU put out by a critical XID or ECC error returns after this long without one (see *GPUs and nodes*)",
)

# Right-sizing and used GPU-hours (workloads/app_settings.py).
GPUPORTAL_BUSY_SM_PERCENT = rightsizing.read(
    "GPUPORTAL_BUSY_SM_PERCENT",
    5,
    "a sample with SM utilisation at or above this counts as busy (used GPU-hours)",
)
GPUPORTAL_RIGHTSIZING_MIN_MINUTES = rightsizing.read(
    "GPUPORTAL_RIGHTSIZING_MIN_MINUTES",
    10,
    "runs shorter than this get no hint and are never listed as oversized",
)
GPUPORTAL_RIGHTSIZING_HEADROOM_PERCENT = rightsizing.read(
    "GPUPORTAL_RIGHTSIZING_HEADROOM_PERCENT", 20, "room a suggested size keeps above both peaks"
)
GPUPORTAL_OVERSIZED_MEM_PERCENT = rightsizing.read(
    "GPUPORTAL_OVERSIZED_MEM_PERCENT",
    25,
    "a finished job is listed as oversized when its peak memory is under this share of what it asked…",
)
GPUPORTAL_OVERSIZED_SM_PERCENT = rightsizing.read(
    "GPUPORTAL_OVERSIZED_SM_PERCENT",
    25,
    "…and its peak SM utilisation under this (for slice jobs, of the slices' share of the GPU)",
)
