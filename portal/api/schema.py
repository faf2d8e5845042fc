"""The OpenAPI schema's defaults for every operation (REST_FRAMEWORK's DEFAULT_SCHEMA_CLASS).

Every operation documents the error answers it can give, each with the one error body of
portal.api.errors; operations with a body take JSON only (the only parser the API has). Doing
it here rather than per view keeps a new endpoint documented without anyone remembering to.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from portal.api.errors import MAX_BODY_TEXT

ERRORS: dict[int, str] = {
    400: "Invalid input, filters or page size: `fields` names each field with its messages.",
    401: "Not signed in, or the token is wrong, expired or revoked.",
    403: "Not allowed: a token without the scope, a viewer's write, or an action for operators only.",
    404: "No such object among yours (another project's objects are not found either), or no such page.",
    405: "This method is not allowed on this path.",
    429: "Too many requests: a rate limit, the queued-jobs cap, or too many followed log streams.",
}
BODY_ERRORS: dict[int, str] = {
    413: f"The body is larger than the portal accepts ({MAX_BODY_TEXT}).",
    415: "The body is not JSON: send it with `Content-Type: application/json`.",
}


# Inline because a serializer class cannot declare a field named `fields` (Serializer has that attribute).
ERROR_DETAIL = inline_serializer(
    "ErrorDetail",
    {
        "status": serializers.IntegerField(help_text="The HTTP status again."),
        "code": serializers.CharField(
            help_text="`invalid` for field errors, else e.g. `not_found`, `queue_full`."
        ),
        "message": serializers.CharField(help_text="One line to show a person."),
        "fields": serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            help_text="Field name -> messages (empty unless the input was invalid).",
        ),
    },
)


class ErrorSerializer(serializers.Serializer[Any]):
    """Every API failure answers this body."""

    error = ERROR_DETAIL

    class Meta:
        ref_name = "Error"


class PortalAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        has_body = self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None
        errors = {**ERRORS, **(BODY_ERRORS if has_body else {})}
        response_for = self._get_response_for_code  # untyped in drf-spectacular
        for status, description in sorted(errors.items()):
            code = str(status)
            own = responses.get(code)  # a view's own description of a code wins; the body is the one body
            body = OpenApiResponse(ErrorSerializer, description=(own or {}).get("description") or description)
            if own is None or "content" not in own:
                responses[code] = response_for(body, code, direction=direction)  # type: ignore[no-untyped-call]
        return responses
