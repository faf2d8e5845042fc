"""Portal pages for accounts: a project (members, quota, webhook), my tokens, settings, notifications."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from accounts import operator_factor, selectors, services, webhooks
from accounts.choices import ROLES_THAT_MANAGE, Role
from accounts.forms import MemberAddForm, NotificationsForm, TokenForm, WebhookForm
from accounts.models import Membership, Project, User


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
    return _project_page(request, user, selectors.project_get(user=user, slug=slug))


def _project_page(
    request: HttpRequest, user: User, project: Project, *, status: int = 200, **extra: Any
) -> HttpResponse:
    role = selectors.project_role(user=user, project=project)
    can_manage = selectors.is_operator(user) or role in ROLES_THAT_MANAGE
    context = {
        "project": project,
        "quota": project.quota,
        "members": selectors.membership_list(project=project),
        "can_manage": can_manage,
        "my_role": role,
        "roles": Role.choices,
        "add_form": MemberAddForm(),
    }
    if can_manage:  # only managers (and operators) see the webhook, its form and its log
        hook = selectors.webhook_get(project=project)
        context["webhook"] = hook
        context["deliveries"] = selectors.webhook_deliveries(webhook=hook) if hook else []
        context["webhook_form"] = WebhookForm(initial={"url": hook.url if hook else ""})
    context.update(extra)
    return render(request, "accounts/project_detail.html", context, status=status)


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
@require_safe
def user_settings(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/settings.html")


@login_required
def operator_pending(request: HttpRequest) -> HttpResponse:
    """A staff account whose second factor does not count for operators yet: mail the link (again)."""
    user = _user(request)
    if request.method == "POST":
        if operator_factor.operator_factor_offer(user=user, request=request):
            messages.success(request, f"A confirmation link is on its way to {user.email}.")
        return HttpResponseRedirect(reverse("accounts:operator-pending"))
    context = {"operator": selectors.is_operator(user), "totp": operator_factor.totp_of(user) is not None}
    return render(request, "accounts/operator_pending.html", context)


@login_required
def operator_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The mailed link: a page with a button (a GET changes nothing), the button confirms."""
    if request.method != "POST":
        return render(request, "accounts/operator_confirm.html")
    try:
        operator_factor.operator_factor_confirm(user=_user(request), token=token, request=request)
    except ValidationError as exc:
        return render(request, "accounts/operator_confirm.html", {"error": _errors(exc)}, status=400)
    messages.success(request, "Confirmed: your account has operator access.")
    return HttpResponseRedirect("/admin/")


@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    """Which of my job events email me (the project's webhook, if any, gets them all)."""
    user = _user(request)
    form = NotificationsForm.of(user, _posted(request))
    if request.method == "POST" and form.is_valid():
        services.user_set_notifications(
            user=user, email=form.cleaned_data["email"], events=form.choices(), request=request
        )
        messages.success(request, "Saved your notification choices.")
        return HttpResponseRedirect(reverse("accounts:notifications"))
    return render(request, "accounts/notifications.html", {"form": form})


@login_required
@require_POST
def webhook_set(request: HttpRequest, slug: str) -> HttpResponse:
    """Set or change the URL; a new hook's secret is shown on the page this once."""
    user = _user(request)
    project = selectors.project_get(user=user, slug=slug)
    webhooks.require_manager(actor=user, project=project, what="set its webhook")
    form = WebhookForm(request.POST)
    try:
        if not form.is_valid():
            return _project_page(request, user, project, status=400, webhook_form=form)
        _, secret = webhooks.webhook_set(
            actor=user, project=project, url=form.cleaned_data["url"], request=request
        )
    except ValidationError as exc:
        form.add_error("url", exc.messages)
        return _project_page(request, user, project, status=400, webhook_form=form)
    if secret is None:
        messages.success(request, "Saved the webhook URL; the secret is unchanged.")
        return HttpResponseRedirect(reverse("accounts:project", args=[slug]) + "#webhook-h")
    return _project_page(request, user, project, webhook_secret=secret)


@login_required
@require_POST
def webhook_ping(request: HttpRequest, slug: str) -> HttpResponse:
    user = _user(request)
    project = selectors.project_get(user=user, slug=slug)
    try:
        delivery = webhooks.webhook_ping(actor=user, project=project, request=request)
        messages.success(request, f"Sent test event {delivery.pk}; its delivery shows below.")
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    return HttpResponseRedirect(reverse("accounts:project", args=[slug]) + "#webhook-h")


@login_required
@require_POST
def webhook_remove(request: HttpRequest, slug: str) -> HttpResponse:
    user = _user(request)
    project = selectors.project_get(user=user, slug=slug)
    if webhooks.webhook_remove(actor=user, project=project, request=request):
        messages.success(request, "Removed the webhook; its delivery log went with it.")
    return HttpResponseRedirect(reverse("accounts:project", args=[slug]) + "#webhook-h")
