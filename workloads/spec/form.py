"""The submit form's spec fields, made from the declaration, and the request to and from them.

Each field of JobSpec becomes a Django field the way its hints say the form edits it (`Hints.form`):
an input of its type, shell-quoted words, NAME=value lines, or one input per field of a nested
Struct (named with the field's prefix). Rows (volumes) are laid out by the form itself, and a field
the form does not edit is left out. The form only turns text into the request shape: the service
parses the request (workloads.spec.parse_spec), and its errors land on these fields by name.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import msgspec
from django import forms
from msgspec import inspect as mi

from workloads.app_settings import SiteSwitch
from workloads.spec.fields import SPEC_FIELDS, SpecField, fields_of
from workloads.spec.limits import site_maximum


class WordsField(forms.CharField):
    """A list of words, written shell-quoted (no shell ever runs it)."""

    def __init__(self, *, what: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.what = what

    def prepare_value(self, value: Any) -> Any:
        return shlex.join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value)
        try:
            return shlex.split(text or "")
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot split the {self.what}: {exc}") from exc


class NameValueLinesField(forms.CharField):
    """A list of {name, value} objects, written NAME=value, one per line."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return "\n".join(f"{item['name']}={item['value']}" for item in value)
        return value

    def to_python(self, value: Any) -> list[dict[str, str]]:  # type: ignore[override]
        out = []
        for line in (super().to_python(value) or "").splitlines():
            line = line.strip()
            if not line:
                continue
            name, sep, text = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"{line[:40]!r}: write NAME=value.")
            out.append({"name": name.strip(), "value": text})
        return out


def _help(field: SpecField) -> str:
    return field.description if field.hints.form_help is None else field.hints.form_help


def _initial(field: SpecField) -> Any:
    if field.hints.form_initial is not None:
        return field.hints.form_initial
    return None if field.default is msgspec.NODEFAULT else msgspec.to_builtins(field.default)


def _input(field: SpecField, *, optional: bool) -> forms.Field:
    """One input of the field's own type. A number or a choice must be filled in (the form starts
    from the default) unless the field is optional (it may be null); text may be left empty where
    the spec has a default."""
    common: dict[str, Any] = {"label": field.title, "help_text": _help(field), "initial": _initial(field)}
    kind = field.kind
    if isinstance(kind, mi.IntType):
        highest = site_maximum(field) if field.hints.site_maximum or not field.hints.quota else None
        # A quota-bound number's real maximum is the project's, which the parser checks and names.
        return forms.IntegerField(min_value=field.lowest, max_value=highest, required=not optional, **common)
    if isinstance(kind, mi.BoolType):
        return forms.BooleanField(required=False, **common)
    if isinstance(kind, mi.EnumType):
        choices = getattr(kind.cls, "choices", None) or [(m.value, m.value) for m in kind.cls]
        # A choice whose values include "" has an empty value of its own meaning (Placement.ANY).
        required = not optional and "" not in (value for value, _ in choices)
        return forms.ChoiceField(choices=choices, required=required, **common)
    if isinstance(kind, mi.StrType):
        required = field.required and not optional
        return forms.CharField(max_length=kind.max_length, required=required, **common)
    raise TypeError(f"{field.name}: declare how the form edits it (Hints.form)")


def _fields(field: SpecField) -> dict[str, forms.Field]:
    widget = field.hints.form
    if widget == "shell":
        what = field.title.lower()
        return {field.name: WordsField(what=what, required=False, label=field.title, help_text=_help(field))}
    if widget == "lines":
        return {field.name: NameValueLinesField(required=False, label=field.title, help_text=_help(field))}
    if widget == "fields" and field.struct is not None:
        prefix = field.hints.form_prefix
        return {prefix + sub.name: _input(sub, optional=True) for sub in fields_of(field.struct)}
    if widget == "input":
        return {field.name: _input(field, optional=field.nullable)}
    return {}  # "rows": the form lays them out; "none": the form does not edit it


def spec_form_fields(*, switches: frozenset[SiteSwitch]) -> dict[str, forms.Field]:
    """The form's fields of the spec, in the declaration's order; a field for the site's tests and
    demo only while its switch is on."""
    out: dict[str, forms.Field] = {}
    for field in SPEC_FIELDS:
        if field.hints.tests_and_demo is None or field.hints.tests_and_demo in switches:
            out.update(_fields(field))
    return out


def form_request(cleaned: Mapping[str, Any]) -> dict[str, Any]:
    """The request from a valid form's cleaned fields (a nested Struct left empty is left out)."""
    out: dict[str, Any] = {}
    for field in SPEC_FIELDS:
        if field.hints.form == "fields" and field.struct is not None:
            names = {sub.name: field.hints.form_prefix + sub.name for sub in fields_of(field.struct)}
            values = {sub: cleaned.get(name) for sub, name in names.items() if name in cleaned}
            if any(v is not None for v in values.values()):
                out[field.name] = values
        elif field.hints.form in ("input", "shell", "lines") and field.name in cleaned:
            out[field.name] = cleaned[field.name]
    return out


def form_initial(request: Mapping[str, Any]) -> dict[str, Any]:
    """A stored request (template, job) as the form's initial values; rows are the form's own."""
    out: dict[str, Any] = {}
    for field in SPEC_FIELDS:
        if field.name not in request or field.hints.form in ("rows", "none"):
            continue
        value = request[field.name]
        if field.hints.form == "fields" and field.struct is not None:
            for sub in fields_of(field.struct):
                out[field.hints.form_prefix + sub.name] = (value or {}).get(sub.name)
        else:
            out[field.name] = value
    return out
