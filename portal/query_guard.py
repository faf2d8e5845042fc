"""Refuse a query string that holds a NUL character, before any view reads it.

Postgres text cannot hold NUL, so a filter such as `?name=%00` would reach the database and fail
there with a 500. The API answers its JSON error body; pages a plain 400.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from portal.api.errors import error_body

MESSAGE = "A query parameter holds a NUL character (%00); remove it."


class NulQueryMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        fields = _with_nul(request)
        return _refused(request, fields) if fields else self.get_response(request)


def _with_nul(request: HttpRequest) -> list[str]:
    """The parameters whose name or any value holds a NUL."""
    return sorted(k for k, values in request.GET.lists() if "\x00" in k or any("\x00" in v for v in values))


def _refused(request: HttpRequest, fields: list[str]) -> HttpResponse:
    if request.path.startswith("/api/"):
        fields_body = {key.replace("\x00", "")[:60]: [MESSAGE] for key in fields}
        return JsonResponse(error_body(400, "invalid", MESSAGE, fields_body), status=400)
    return HttpResponseBadRequest(MESSAGE, content_type="text/plain; charset=utf-8")
