"""The API schema's job spec: DRF serializers made from the declaration. They only document; the
services parse every body themselves, strictly (workloads.spec.parse_spec), with the project's limits.

Made as serializers rather than from msgspec.json.schema_components because every other body of the
API is a DRF serializer, and portal.api.schema's AutoSchema gives those the API's common rules: a
closed object where `rejects_unknown_fields` is set, the NUL and blank patterns of free text, the
request/response split and the partial (PATCH, overrides) variants. Made the same way, the spec's
components (`Spec`, `SpecRequest`, `PatchedSpecRequest`, `JobCreateRequest`, `EnvVar`, `VolumeMount`)
follow those rules without restating them, and keep the names clients know them by.

A field's bounds are the declared ones, narrowed by the site's own caps; a field the project's quota
bounds says so in its description. A field for the site's tests and demo only is left out.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import msgspec
from msgspec import inspect as mi
from rest_framework import serializers

from workloads.spec.declaration import NO_NUL, JobSpec
from workloads.spec.fields import SPEC_FIELDS, SpecField, fields_of
from workloads.spec.limits import site_maximum

QUOTA = "At most the project's quota (`quota.{}` of GET /api/v1/projects/{{slug}}/)."
Serializer = type[serializers.Serializer[Any]]
if TYPE_CHECKING:
    DrfField = serializers.Field[Any, Any, Any, Any]


def spec_serializer(name: str, *, extra: Mapping[str, DrfField] | None = None) -> Serializer:
    """The serializer `<name>Serializer` of JobSpec's public fields, and `extra` fields after them."""
    fields = {f.name: _field(f) for f in SPEC_FIELDS if not f.hints.tests_and_demo}
    return _serializer(name, JobSpec, {**fields, **(extra or {})})


@functools.cache
def _struct_serializer(struct: type[msgspec.Struct]) -> Serializer:
    """One class per nested Struct, so its component is made once (EnvVar, VolumeMount)."""
    return _serializer(struct.__name__, struct, {f.name: _field(f) for f in fields_of(struct)})


def _serializer(name: str, struct: type[msgspec.Struct], fields: Mapping[str, Any]) -> Serializer:
    info = mi.type_info(struct)
    closed = isinstance(info, mi.StructType) and info.forbid_unknown_fields
    doc = inspect.cleandoc(struct.__doc__ or "").split("\n\n")[0]
    attrs = {"__doc__": doc, "__module__": __name__, "rejects_unknown_fields": closed, **fields}
    return cast("Serializer", type(f"{name}Serializer", (serializers.Serializer,), attrs))


def _description(field: SpecField) -> str:
    words = [field.description] if field.description else []
    if field.hints.quota:
        words.append(QUOTA.format(field.name))
    return " ".join(words)


def _field(field: SpecField) -> DrfField:
    kwargs: dict[str, Any] = {"label": field.title}
    if field.required:
        kwargs["required"] = True
    else:
        kwargs["default"] = msgspec.to_builtins(field.default)
    if field.nullable:
        kwargs["allow_null"] = True
    description = _description(field)
    if description:
        kwargs["help_text"] = description
    if isinstance(field.kind, mi.IntType):
        kwargs.update(_given(max_value=site_maximum(field)))  # the site's cap, where it has one
    return _of(field.kind, kwargs)


def _given(**options: Any) -> dict[str, Any]:
    """The options that are set (the declaration leaves a bound out where it has none)."""
    return {name: value for name, value in options.items() if value is not None}


def _of(kind: mi.Type, kwargs: dict[str, Any]) -> DrfField:
    """The DRF field of a declared type (a list's items too)."""
    if isinstance(kind, mi.Metadata):
        return _of(kind.type, kwargs)
    if isinstance(kind, mi.BoolType):
        return serializers.BooleanField(**kwargs)
    if isinstance(kind, mi.IntType):
        return serializers.IntegerField(**{**_given(min_value=kind.ge, max_value=kind.le), **kwargs})
    if isinstance(kind, mi.StrType):
        kwargs.update(_given(max_length=kind.max_length, min_length=kind.min_length))
        if kind.pattern and kind.pattern != NO_NUL:
            # The pattern says whether it may be blank (DRF's blank option would add a second way).
            return serializers.RegexField(kind.pattern, **kwargs)
        # Free text: the API's AutoSchema gives request strings the NUL pattern (portal.api.schema).
        return serializers.CharField(allow_blank=not kind.min_length, **kwargs)
    if isinstance(kind, mi.EnumType):
        choices = getattr(kind.cls, "choices", None) or [(m.value, m.value) for m in kind.cls]
        return serializers.ChoiceField(choices=choices, **kwargs)
    if isinstance(kind, mi.ListType):
        kwargs.update(_given(max_length=kind.max_length, min_length=kind.min_length))
        return serializers.ListField(child=_of(kind.item_type, {}), **kwargs)
    if isinstance(kind, mi.StructType):
        return cast("DrfField", _struct_serializer(kind.cls)(**kwargs))
    raise TypeError(f"{kind}: no API schema for this type; declare it as one of the kinds above")
