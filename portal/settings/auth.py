"""Users and sign-in: passwords, allauth (email sign-in with mandatory verification, MFA, rate
limits), OpenID Connect (portal/settings/oidc.py) and the mail that verification and resets need."""

from __future__ import annotations

from portal.settings.environment import (
    oidc_client_id,
    oidc_client_secret,
    oidc_client_secret_file,
    oidc_name,
    oidc_server_url,
)
from portal.settings.oidc import socialaccount_providers

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
# Mail the account's owner about every security change (password, addresses, two-factor).
ACCOUNT_EMAIL_NOTIFICATIONS = True
ACCOUNT_ADAPTER = "accounts.adapters.AccountAdapter"
ACCOUNT_RATE_LIMITS = {
    # 5 failures per account per 5 minutes: the 6th attempt is refused, on every login path.
    "login_failed": "20/m/ip,5/300s/key",
    "reset_password": "20/m/ip,5/m/key",
    "signup": "20/m/ip",
}
# OpenID Connect sign-in, off unless configured (portal/settings/oidc.py says how it links accounts).
SOCIALACCOUNT_PROVIDERS = socialaccount_providers(
    server_url=oidc_server_url,
    client_id=oidc_client_id,
    secret=oidc_client_secret,
    secret_file=oidc_client_secret_file,
    name=oidc_name,
)
SOCIALACCOUNT_ADAPTER = "accounts.adapters.SocialAccountAdapter"
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = True  # a verified email's first sign-in links the account
SOCIALACCOUNT_STORE_TOKENS = False
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
# Sign-up and password reset need delivered mail (verification is mandatory): EMAIL_BACKEND is SMTP
# in production (environment.py), and accounts/checks.py fails `check --deploy` on one that delivers nothing.
