"""One env-driven settings module: production differs from the demo only by environment variables.

With no environment set the portal runs embedded: an SQLite file, an in-process task broker and
channel layer, one process. Production sets DATABASE_URL, REDIS_URL, SECRET_KEY (or SECRET_KEY_FILE)
and ALLOWED_HOSTS, and gets the hardened defaults below (GPUPORTAL_PRODUCTION=1 or DEBUG=0: either
one means production, and a missing secret, host list or Redis then stops the start). Every setting
has a safe development default or raises ImproperlyConfigured.
"""

from __future__ import annotations

import sys
from pathlib import Path

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured

from portal.settings_oidc import form_action_origins, socialaccount_providers

django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

_PRODUCTION_FLAG = env.bool("GPUPORTAL_PRODUCTION", default=False)
# `manage.py demo` sets GPUPORTAL_DEMO: embedded defaults, but the pages users see (404, 500), not
# Django's debug pages, which show the URL configuration and settings to anyone.
DEMO = env.bool("GPUPORTAL_DEMO", default=False)
DEBUG = env.bool("DEBUG", default=not (_PRODUCTION_FLAG or DEMO))
# Debug off means a real deployment, flag or not (the demo aside): a half-hardened server (wildcard
# hosts, a known secret key, cookies without Secure) is worse than one that refuses to start.
PRODUCTION = _PRODUCTION_FLAG or not (DEBUG or DEMO)
if _PRODUCTION_FLAG and (DEBUG or DEMO):
    raise ImproperlyConfigured("GPUPORTAL_PRODUCTION=1 with DEBUG or GPUPORTAL_DEMO on: pick one.")


def _secret_key() -> str:
    path = env.str("SECRET_KEY_FILE", default="")
    if path:
        return Path(path).read_text(encoding="utf-8").strip()
    key = str(env.str("SECRET_KEY", default=""))
    if key:
        return key
    if PRODUCTION:
        raise ImproperlyConfigured("Set SECRET_KEY or SECRET_KEY_FILE in production.")
    return "dev-only-insecure-key-" + "x" * 40


SECRET_KEY = _secret_key()
ALLOWED_HOSTS: list[str] = env.list("ALLOWED_HOSTS", default=[] if PRODUCTION else ["*"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("Set ALLOWED_HOSTS in production (comma separated).")
CSRF_TRUSTED_ORIGINS: list[str] = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# How many reverse proxies in front of the portal append to X-Forwarded-For. The client's address is
# read that many hops from the right; with 0 the header is ignored, since any client can write it.
# The API throttle (DRF) and the login rate limits (allauth) both read this one number.
TRUSTED_PROXIES = env.int("GPUPORTAL_TRUSTED_PROXIES", default=0)
if TRUSTED_PROXIES < 0:
    raise ImproperlyConfigured("GPUPORTAL_TRUSTED_PROXIES is a count of proxies: 0 or more.")
ALLAUTH_TRUSTED_PROXY_COUNT = TRUSTED_PROXIES

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "channels",
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "accounts",
    "gpu",
    "workloads",
    "portal",
]

MIDDLEWARE = [
    "portal.probes.ProbeMiddleware",  # first: probes skip the host check and the HTTPS redirect
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "portal.query_guard.NulQueryMiddleware",  # ?x=%00 would reach Postgres and fail there
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "accounts.middleware.StaffMfaMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "portal.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "portal" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.signup",
            ],
        },
    },
]

VAR_DIR = Path(env.str("GPUPORTAL_VAR_DIR", default=str(BASE_DIR / "var")))
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'portal.sqlite3'}")}
DATABASES["default"]["ATOMIC_REQUESTS"] = True
EMBEDDED = DATABASES["default"]["ENGINE"].endswith("sqlite3")
# A pool of Postgres connections per process (psycopg_pool): an ASGI request otherwise opens and
# closes its own connection (about 6 ms on loopback, as long as a small API read). 0 turns it off.
DB_POOL_SIZE = env.int("DB_POOL_SIZE", default=0)
if DB_POOL_SIZE and not EMBEDDED:
    DATABASES["default"]["OPTIONS"] = {"pool": {"min_size": 2, "max_size": DB_POOL_SIZE, "timeout": 20}}


def _role() -> str:
    """This process's part (web, worker, beat, controller, ...): GPUPORTAL_ROLE as the chart sets it,
    else guessed from the command line."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else Path("python")
    if program.name == "__main__.py":  # python -m uvicorn: the package, not its __main__
        program = program.parent
    words = [Path(arg).name for arg in sys.argv] if program.name != "pytest" else []  # pytest -k worker
    guess = next((w for w in ("worker", "beat", "controller", "provisioner", "demo") if w in words), "")
    return str(env.str("GPUPORTAL_ROLE", default=guess or program.name))[:40]


# Processes that work in a loop of short units (a Celery task, a controller tick) keep their
# connection between units for CONN_MAX_AGE seconds: a new Postgres connection is a new server
# process, and B4's worker opened about 5 a job when every task made its own. Web processes pool
# instead (a pool and CONN_MAX_AGE do not mix). A kept connection is checked before its first use
# in each unit (CONN_HEALTH_CHECKS), so one killed by a Postgres restart is replaced, not used.
KEEPS_CONNECTIONS = ("worker", "provisioner", "controller")
ROLE = _role()
_KEEP_S = 300 if ROLE in KEEPS_CONNECTIONS else 0
_POOLED = bool(DB_POOL_SIZE and not EMBEDDED)  # Django refuses a pool with persistent connections
DATABASES["default"]["CONN_MAX_AGE"] = 0 if _POOLED else env.int("CONN_MAX_AGE", default=_KEEP_S)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True


if not EMBEDDED:
    # Shown in pg_stat_activity and in Postgres' connection log lines: which tier holds (or churns)
    # connections, at a glance.
    DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = f"gpuportal-{ROLE}"
if EMBEDDED:
    # One process, several threads (web, worker, controller): WAL and immediate transactions avoid
    # "database is locked" between readers and the writer.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }

REDIS_URL = env.str("REDIS_URL", default="")
if PRODUCTION and not REDIS_URL:
    raise ImproperlyConfigured("Set REDIS_URL in production (Celery broker, channel layer, cache).")

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"

CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-task leaves the message for another worker
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 90
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers and beat retry a broker that is down every 2 s (portal/broker.py) for as long as it is down:
# Celery's default of 100 tries would end them after 200 s of an outage (beat and the worker exited
# in the 5-minute T08 drill), and Kubernetes would then restart them only after its own back-off.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Celery's Django fixup closes every connection before and after each task, whatever CONN_MAX_AGE
# says, unless this is set (it then closes them once per this many tasks); portal/celery.py closes
# them around a task the way Django does around a request: when obsolete or broken.
CELERY_DB_REUSE_MAX = 1_000_000

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"

# allauth: email sign-in, mandatory verification, MFA (TOTP + recovery codes), rate limits.
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = "username"
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_UNIQUE_EMAIL = True
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = False
ACCOUNT_LOGIN_ON_PASSWORD_RESET = False
ACCOUNT_SESSION_REMEMBER = False
ACCOUNT_ADAPTER = "accounts.adapters.AccountAdapter"
ACCOUNT_ALLOW_SIGNUPS = env.bool("GPUPORTAL_ALLOW_SIGNUPS", default=False)
ACCOUNT_RATE_LIMITS = {
    # 5 failures per account per 5 minutes: the 6th attempt is refused, on every login path.
    "login_failed": "20/m/ip,5/300s/key",
    "reset_password": "20/m/ip,5/m/key",
    "signup": "20/m/ip",
}
# OpenID Connect sign-in, off unless configured (portal/settings_oidc.py says how it links accounts).
SOCIALACCOUNT_PROVIDERS = socialaccount_providers(env)
SOCIALACCOUNT_ADAPTER = "accounts.adapters.SocialAccountAdapter"
SOCIALACCOUNT_ALLOW_SIGNUPS = env.bool("GPUPORTAL_OIDC_ALLOW_SIGNUPS", default=False)
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = True  # a verified email's first sign-in links the account
SOCIALACCOUNT_STORE_TOKENS = False
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = env.str("GPUPORTAL_MFA_ISSUER", default="GPU portal")

# Sign-up and password reset need delivered mail (verification is mandatory): SMTP in production,
# and accounts/checks.py fails `check --deploy` on a backend that delivers nothing.
EMAIL_BACKEND = env.str(
    "EMAIL_BACKEND",
    default="django.core.mail.backends.smtp.EmailBackend"
    if PRODUCTION
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="gpu-portal@localhost")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.TokenScopePermission"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.PortalAutoSchema",  # errors documented on every operation
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],  # JSON only: a form body is a clear 415
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"token_create": "10/min"},
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "NUM_PROXIES": TRUSTED_PROXIES,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Projects, memberships, tokens and GPU jobs. "
    "Authenticate with `Authorization: Bearer <token>`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs' assets come from the drf-spectacular-sidecar package, under the site's own CSP.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Deep links put a link inside each operation's toggle button: nested controls (axe, WCAG 4.1.2).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Front-end libraries installed from the npm registry (package.json), never copied into the repo.
STATICFILES_DIRS = [
    ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
    ("vendor/pico", BASE_DIR / "node_modules" / "@picocss" / "pico" / "css"),
    ("vendor/chartjs", BASE_DIR / "node_modules" / "chart.js" / "dist"),
]
WHITENOISE_USE_FINDERS = True

# Security headers on every response; the production-only parts are switched on below.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=12 * 3600)
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'", *form_action_origins(env)],  # and the OIDC provider's sign-in
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=PRODUCTION)
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
if env.bool("TRUST_X_FORWARDED_PROTO", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# The portal's own tunables, Celery routes and beat schedule.
from portal.settings_tunables import *  # noqa: E402, F403
