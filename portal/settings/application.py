"""The Django application: installed apps, middleware, templates, static files, locale, logging."""

from __future__ import annotations

from portal.settings.environment import BASE_DIR, log_level

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

# Messages live in the session, never in a cookie: the admin shows a new node token's secret in one.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

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

# gpu never imports workloads, so the TokenReview call that checks node agents' tokens is named here
# (like AUTHENTICATION_BACKENDS) and loaded when needed (gpu/identity.py).
GPUPORTAL_AGENT_TOKEN_REVIEWER = "workloads.k8s.tokenreview.review_token"  # noqa: S105 - a dotted path

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": log_level},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
