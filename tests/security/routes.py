"""Every URL pattern of the portal, walked from the resolver, and a real URL for each, with its
parameters filled from a populated portal (tests/security/populated.py).

A parameter is filled by the route's own case (CASES), else by the parameter's name where the name
means one thing everywhere (BY_NAME), else by the admin's naming scheme. A pattern whose parameters
none of these fill has no case, and the walks fail on it, so a new URL cannot go unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from allauth.account.forms import default_token_generator
from allauth.account.models import EmailAddress, EmailConfirmationHMAC
from allauth.account.utils import user_pk_to_url_str
from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.core import signing
from django.db.models import Model
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from accounts import operator_factor
from accounts.models import Membership
from portal.settings.oidc import PROVIDER_ID
from tests.security.populated import Populated

Filler = Callable[[Populated], str]

BY_NAME: dict[str, Filler] = {
    "slug": lambda p: p.world.alpha.slug,
    "project_slug": lambda p: p.world.alpha.slug,
    "uid": lambda p: str(p.job.uid),
    "id": lambda p: str(p.job.uid),
    "name": lambda p: p.node.name,
    "uuid": lambda p: p.gpu.uuid,
    "format": lambda p: "json",
    "provider_id": lambda p: PROVIDER_ID,
}


def _confirm_key(p: Populated) -> str:
    return str(EmailConfirmationHMAC(EmailAddress.objects.get(user=p.world.owner)).key)


def _membership(p: Populated) -> str:
    return str(Membership.objects.get(project=p.world.alpha, user=p.world.member).pk)


CASES: dict[str, dict[str, Filler]] = {
    "me/projects/<slug:slug>/members/<int:pk>/": {"pk": lambda p: _membership(p)},
    "me/tokens/<int:pk>/revoke/": {"pk": lambda p: str(p.token.pk)},
    # A well-formed link of the owner's that names no factor of theirs: refused as a confirmation.
    "me/operator/confirm/<str:token>/": {
        "token": lambda p: signing.TimestampSigner(salt=operator_factor.SALT).sign(f"{p.world.owner.pk}:0")
    },
    "jobs/templates/<int:pk>/edit/": {"pk": lambda p: str(p.template.pk)},
    "jobs/templates/<int:pk>/delete/": {"pk": lambda p: str(p.template.pk)},
    "accounts/^confirm-email/(?P<key>[-:\\w]+)/$": {"key": _confirm_key},
    "accounts/^password/reset/key/(?P<uidb36>[0-9A-Za-z]+)-(?P<key>.+)/$": {
        "uidb36": lambda p: user_pk_to_url_str(p.world.owner),
        "key": lambda p: default_token_generator.make_token(p.world.owner),
    },
    "api/v1/^projects/(?P<project_slug>[a-z0-9-]+)/members/(?P<pk>[^/.]+)/$": {
        "pk": lambda p: _membership(p)
    },
    "api/v1/^tokens/(?P<pk>[^/.]+)/$": {"pk": lambda p: str(p.token.pk)},
    "api/v1/^templates/(?P<pk>[^/.]+)/$": {"pk": lambda p: str(p.template.pk)},
    "api/v1/^templates/(?P<pk>[^/.]+)/submit/$": {"pk": lambda p: str(p.template.pk)},
    "^api/(?P<path>.*)$": {"path": lambda p: "no-such-route/"},
    "admin/(?P<url>.*)$": {"url": lambda p: "no-such-page/"},
    "admin/r/<path:content_type_id>/<path:object_id>/": {
        "content_type_id": lambda p: str(ContentType.objects.get_for_model(p.job).pk),
        "object_id": lambda p: str(p.job.pk),
    },
    "admin/accounts/user/<id>/password/": {"id": lambda p: str(p.world.owner.pk)},
}

FORMAT_SUFFIX = "\\.(?P<format>[a-z0-9]+)/?$"
_PATH_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")
_REGEX_PARAM = re.compile(r"\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)")


def all_routes() -> list[tuple[str, URLPattern]]:
    """(route, pattern) for every URL pattern, nested includes joined, in resolver order."""
    found: list[tuple[str, URLPattern]] = []

    def walk(patterns: list[URLPattern | URLResolver], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            else:
                found.append((route, pattern))

    walk(get_resolver().url_patterns, "")
    return found


def params(route: str) -> list[str]:
    return _PATH_PARAM.findall(_REGEX_PARAM.sub("", route)) + _REGEX_PARAM.findall(route)


def _admin_filler(route: str, pattern: URLPattern, param: str) -> Filler | None:
    """The admin's own scheme: `<app>_<model>_<view>` takes a row of that model, the app index its label."""
    if not route.startswith("admin/"):
        return None
    if param == "app_label":
        label = re.search(r"\(\?P<app_label>([\w|]+)\)", route)
        return (lambda p: label[1].split("|")[0]) if label else None
    if param != "object_id":
        return None
    model = _admin_model(route)
    if model is None:
        return None

    def first_row(p: Populated) -> str:
        pk = model._default_manager.order_by("pk").values_list("pk", flat=True).first()
        assert pk is not None, f"{route}: no {model.__name__} row; make one in tests/security/populated.py"
        return str(pk)

    return first_row


def _admin_model(route: str) -> type[Model] | None:
    match = re.match(r"admin/(\w+)/(\w+)/<path:object_id>/", route)
    if not match:
        return None
    try:
        return apps.get_model(match[1], match[2])
    except LookupError:
        return None


def filler(route: str, pattern: URLPattern, param: str) -> Filler | None:
    own = CASES.get(route.replace(FORMAT_SUFFIX, "/$"), {})
    return own.get(param) or BY_NAME.get(param) or _admin_filler(route, pattern, param)


def missing_cases() -> list[str]:
    return [
        f"{route} ({param})"
        for route, pattern in all_routes()
        for param in params(route)
        if filler(route, pattern, param) is None
    ]


def url_of(route: str, pattern: URLPattern, populated: Populated) -> str:
    values = {param: filler(route, pattern, param)(populated) for param in params(route)}  # type: ignore[misc]
    url = _REGEX_PARAM.sub(lambda m: values[m[1]], route)
    url = _PATH_PARAM.sub(lambda m: values[m[1]], url)
    url = url.replace("^", "").replace("$", "").replace("/?", "/").replace("\\.", ".")
    return "/" + url


def every_url(populated: Populated) -> dict[str, str]:
    """route -> a URL that resolves to that very route (a shadowed pattern would show here)."""
    urls: dict[str, str] = {}
    for route, pattern in all_routes():
        url = urls[route] = url_of(route, pattern, populated)
        match = resolve(url)
        # A node name may hold dots, so nodes/<name>.json reaches the same view as nodes/<name>/.
        same_view = match.url_name is not None and match.url_name == pattern.name
        assert same_view or match.route.replace("^", "") == route.replace("^", ""), f"{url}: not {route}"
    return urls
