"""The OpenAPI schema's defaults for every operation (REST_FRAMEWORK's DEFAULT_SCHEMA_CLASS).

Every operation documents the error answers it can give, each with the one error body of
portal.api.errors; operations with a body take JSON only (the only parser the API has). Doing
it here rather than per view keeps a new endpoint documented without anyone remembering to.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
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
            # A list's items and an object's keys nest: {"scopes": {"5": ["... is not a valid choice."]}}.
            child=serializers.JSONField(),
            help_text="Field name -> messages (empty unless the input was invalid); the messages of a "
            "list's item or an object's key nest under the item's index or the key.",
        ),
    },
)


class ErrorSerializer(serializers.Serializer[Any]):
    """Every API failure answers this body."""

    error = ERROR_DETAIL

    class Meta:
        ref_name = "Error"


# DRF's CharField refuses NUL characters (Postgres cannot store them), and one left blank once its
# whitespace is trimmed unless it allows blanks: the schema says so.
NO_NUL = "^[^\\x00]*$"
NOT_BLANK = "^\\s*[^\\s\\x00][^\\x00]*$"


def _free_text(schema: dict[str, Any]) -> bool:
    """A string schema that says nothing of its shape yet (no format, pattern or choices)."""
    return schema.get("type") == "string" and not {"format", "pattern", "enum"} & set(schema)


class PortalAutoSchema(AutoSchema):
    """Also: a request body whose serializer sets `rejects_unknown_fields` is a closed object
    (`additionalProperties: false`), and a free-text request string or query parameter carries the
    NO_NUL or NOT_BLANK pattern."""

    def _get_parameters(self) -> list[dict[str, Any]]:
        """A free-text query parameter carries NO_NUL too (portal.query_guard refuses a NUL)."""
        parameters: list[dict[str, Any]] = super()._get_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if parameter.get("in") == "query" and _free_text(schema):
                parameter["schema"] = {**schema, "pattern": NO_NUL}
        return parameters

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)  # type: ignore[no-untyped-call]
        if direction == "request" and getattr(serializer, "rejects_unknown_fields", False):
            schema["additionalProperties"] = False
        return schema

    def _map_serializer_field(self, field: Any, direction: Any, bypass_extensions: bool = False) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)  # type: ignore[no-untyped-call]
        # A RegexField's own pattern is added after this hook (from its validator): leave it be.
        own_pattern = any(isinstance(v, RegexValidator) for v in getattr(field, "validators", []))
        free_text = _free_text(schema) and not own_pattern
        if direction == "request" and isinstance(field, serializers.CharField) and free_text:
            blank_refused = field.trim_whitespace and not field.allow_blank
            schema["pattern"] = NOT_BLANK if blank_refused else NO_NUL
        return schema

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
