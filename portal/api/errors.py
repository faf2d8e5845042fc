"""One error body for every API failure: {"error": {"status", "code", "message", "fields"}}.

Service-layer Django exceptions (ValidationError, PermissionDenied) become 400/403 here, so views
never translate them by hand and a client always finds the field messages in the same place.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

MAX_BODY_TEXT = "2.5 MB"  # Django's DATA_UPLOAD_MAX_MEMORY_SIZE default, which the portal keeps


def error_body(status: int, code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API's error body; every answer an API client may get on failure has this shape."""
    return {"error": {"status": status, "code": code, "message": message, "fields": fields or {}}}


class BodyTooLarge(exceptions.APIException):
    status_code = 413
    default_code = "body_too_large"
    default_detail = f"The request body is larger than the portal accepts ({MAX_BODY_TEXT}); send less."


class NotJson(exceptions.UnsupportedMediaType):
    """DRF's own 415 says only that the type is unsupported; say what to send instead."""

    def __init__(self, media_type: str) -> None:
        super().__init__(
            media_type,
            detail=f"The API takes JSON bodies only: send Content-Type: application/json "
            f"(this request sent {media_type or 'no type'}).",
        )


def _from_django(exc: Exception) -> Exception:
    if isinstance(exc, RequestDataTooBig):
        return BodyTooLarge()
    if isinstance(exc, DjangoValidationError):
        detail: Any = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        return exceptions.ValidationError(detail)
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied(str(exc) or None)
    if isinstance(exc, Http404):
        return exceptions.NotFound(str(exc) or None)
    if isinstance(exc, exceptions.UnsupportedMediaType) and not isinstance(exc, NotJson):
        return NotJson(exc.args[0] if exc.args else "")
    return exc


def _message(detail: Any) -> str:
    if isinstance(detail, dict):
        first = next(iter(detail.items()), None)
        if first is None:
            return "Invalid input."
        name, value = first
        text = _message(value)
        return text if name in ("non_field_errors", "detail") else f"{name}: {text}"
    if isinstance(detail, list):
        return _message(detail[0]) if detail else "Invalid input."
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = _from_django(exc)
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    detail = exc.detail
    fields = detail if isinstance(detail, dict) else {}
    code = "invalid" if isinstance(detail, (dict, list)) else str(exc.get_codes())
    response.data = error_body(response.status_code, code, _message(detail), fields)
    return response


@csrf_exempt  # it changes nothing; a POST without the CSRF token would get Django's HTML 403 page
def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any /api/ path that matches no route: the JSON error body, not the HTML 404 page."""
    message = f"No API endpoint at /{request.path.lstrip('/')}; the endpoints are listed at /api/docs/."
    return JsonResponse(error_body(404, "not_found", message), status=404)
