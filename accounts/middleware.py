"""Staff must have MFA before the admin opens: it reaches every project, so a password alone is not
enough; and the factor must be one that counts for operators (accounts/operator_factor.py)."""

from __future__ import annotations

from collections.abc import Callable

from allauth.mfa.utils import is_mfa_enabled
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from accounts.selectors import is_operator


class StaffMfaMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        if request.path.startswith("/admin/") and user.is_authenticated and user.is_staff:
            if not is_mfa_enabled(user):
                messages.warning(
                    request, "Operators must set up two-factor authentication before the admin opens."
                )
                return HttpResponseRedirect(reverse("mfa_activate_totp"))
            if not is_operator(user):
                return HttpResponseRedirect(reverse("accounts:operator-pending"))
        return self.get_response(request)
