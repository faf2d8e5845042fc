"""The HTTP API: Django REST framework and its OpenAPI schema (drf-spectacular)."""

from __future__ import annotations

from portal.settings.environment import TRUSTED_PROXIES

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
