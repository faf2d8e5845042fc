"""What production switches on (HTTPS, secure cookies, HSTS) and the security headers every response
carries, Content-Security-Policy included. What production requires (a secret key, host names,
Redis) environment.py checks as it reads them."""

from __future__ import annotations

from portal.settings.environment import PRODUCTION, TRUSTED_PROXIES, oidc_server_url, trust_x_forwarded_proto
from portal.settings.oidc import form_action_origins

ALLAUTH_TRUSTED_PROXY_COUNT = TRUSTED_PROXIES

# Security headers on every response; the production-only parts are switched on below.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'", *form_action_origins(oidc_server_url)],  # and the OIDC provider's sign-in
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
# The node agents post their samples to the web Service inside the cluster, where TLS ends at the
# Ingress and nothing speaks HTTPS: a redirect would only bounce them (plugin/contract.py's path).
SECURE_REDIRECT_EXEMPT = [r"^api/v1/ingest/"]
if trust_x_forwarded_proto:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
