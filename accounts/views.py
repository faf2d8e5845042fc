"""Portal pages for accounts: a project (members, quota), my tokens, my settings."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import selectors, services
from accounts.choices import ROLES_THAT_MANAGE, Role
from accounts.forms import MemberAddForm, SettingsForm, TokenForm
from accounts.models import Membership, User


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    return request.user


def _posted(request: HttpRequest) -> QueryDict | None:
    return request.POST if request.method == "POST" else None


def _errors(form_or_exc: ValidationError) -> str:
    return " ".join(form_or_exc.messages)


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    user = _user(request)
    project = selectors.project_get(user=user, slug=slug)
    role = selectors.project_role(user=user, project=project)
    context = {
        "project": project,
        "quota": project.quota,
        "members": selectors.membership_list(project=project),
        "can_manage": selectors.is_operator(user) or role in ROLES_THAT_MANAGE,
        "my_role": role,
        "roles": Role.choices,
        "add_form": MemberAddForm(),
    }
    return render(request, "accounts/project_detail.html", context)


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    user = _user(request)
    project = selectors.project_get(user=user, slug=slug)
    form = MemberAddForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(
                [f"{name}: {' '.join(map(str, errs))}" for name, errs in form.errors.items()]
            )
        target = User.objects.filter(email__iexact=form.cleaned_data["email"], is_active=True).first()
        if target is None:
            raise ValidationError("No active user has this email address.")
        services.membership_add(
            actor=user, project=project, user=target, role=Role(form.cleaned_data["role"]), request=request
        )
        messages.success(request, f"Added {target}.")
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, _errors(exc) if isinstance(exc, ValidationError) else str(exc))
    return HttpResponseRedirect(reverse("accounts:project", args=[slug]))


@login_required
@require_POST
def member_change(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    user = _user(request)
    project = selectors.project_get(user=user, slug=slug)
    membership = get_object_or_404(Membership, project=project, pk=pk)
    try:
        if request.POST.get("remove"):
            services.membership_remove(actor=user, membership=membership, request=request)
        else:
            role = request.POST.get("role", "")
            if role not in Role.values:
                raise ValidationError(f"Choose a role: {', '.join(Role.values)}.")
            services.membership_update(actor=user, membership=membership, role=Role(role), request=request)
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, _errors(exc) if isinstance(exc, ValidationError) else str(exc))
    return HttpResponseRedirect(reverse("accounts:project", args=[slug]))


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    form = TokenForm(_posted(request))
    secret = None
    if request.method == "POST" and form.is_valid():
        try:
            _, secret = services.token_create(
                user=user,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_at=form.expires_at(),
                request=request,
            )
            form = TokenForm()
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, _errors(exc) if isinstance(exc, ValidationError) else str(exc))
    context = {"form": form, "secret": secret, "tokens": selectors.token_list(user=user)}
    return render(request, "accounts/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    user = _user(request)
    token = get_object_or_404(selectors.token_list(user=user), pk=pk)
    services.token_revoke(actor=user, token=token, request=request)
    messages.success(request, f"Revoked {token}.")
    return HttpResponseRedirect(reverse("accounts:tokens"))


@login_required
def user_settings(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    form = SettingsForm(_posted(request), initial={"notify_by_email": user.notify_by_email})
    if request.method == "POST" and form.is_valid():
        services.user_set_notifications(
            user=user, enabled=form.cleaned_data["notify_by_email"], request=request
        )
        messages.success(request, "Saved.")
        return HttpResponseRedirect(reverse("accounts:settings"))
    return render(request, "accounts/settings.html", {"form": form})
