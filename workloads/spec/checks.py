"""A value against its field's declaration: exact types (msgspec strict mode: `"4"`, `0.5` and `true`
are not counts), the declared bounds, and the parser's message when it does not fit.

msgspec stops at a Struct's first error; the parser wants every field at fault, so each field is
checked alone, and a nested Struct field by field. The messages derive from the type unless the
field's hints give one (`Hints.invalid`).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import inspect as mi

from workloads.spec.fields import SpecField, fields_of, fits


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final[Any] = _Invalid()  # a value that did not fit; its message is already in Errors


class Errors:
    """The messages of every field at fault, as ValidationError({field: [messages]}) takes them."""

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.fields.setdefault(name, []).append(message)


def invalid_message(field: SpecField) -> str:
    """What the parser says of a value that is not of the field's type, shape or length."""
    if field.hints.invalid:
        return field.hints.invalid.format(max_length=field.max_length)
    kind = field.kind
    if isinstance(kind, mi.IntType):
        return "Must be a whole number."
    if isinstance(kind, mi.BoolType):
        return "Must be true or false."
    if isinstance(kind, mi.EnumType):
        return f"One of {', '.join(str(member.value) for member in kind.cls)}."
    if isinstance(kind, mi.StructType):
        return f"Must be {{{', '.join(f.name for f in fields_of(kind.cls))}}}."
    if isinstance(kind, mi.ListType):
        return f"Must be a list of at most {field.max_length} items."
    return f"At most {field.max_length} characters."


def check(field: SpecField, raw: Any, errors: Errors, *, at: str = "", maximum: int | None = None) -> Any:
    """The value as the declaration types it, or INVALID with the message added under `at` (the
    field's name by default). `maximum` narrows an integer's declared bound (the project's quota)."""
    at = at or field.name
    kind = field.kind
    if raw is None and field.nullable:
        return None
    if isinstance(kind, mi.IntType):
        return _int(field, raw, errors, at, maximum)
    if isinstance(kind, mi.ListType):
        return _list(field, raw, errors, at)
    if isinstance(kind, mi.StructType):
        return check_struct(kind.cls, raw, errors, at=at, message=invalid_message(field))
    if not fits(field, raw):
        errors.add(at, invalid_message(field))
        return INVALID
    return _converted(field, raw)


def _converted(field: SpecField, raw: Any) -> Any:
    """The enum member for an enum's value; any other fitting value as it is."""
    kind = field.kind
    return kind.cls(raw) if isinstance(kind, mi.EnumType) else raw


def _int(field: SpecField, raw: Any, errors: Errors, at: str, maximum: int | None) -> Any:
    if type(raw) is not int:  # bool, float and "4" are refused on purpose
        errors.add(at, field.hints.invalid or "Must be a whole number.")
        return INVALID
    lowest, highest = field.lowest, field.highest
    if maximum is not None:
        highest = maximum if highest is None else min(highest, maximum)
    if (lowest is not None and raw < lowest) or (highest is not None and raw > highest):
        errors.add(at, field.hints.invalid or f"Must be between {lowest} and {highest}.")
    return raw  # kept even out of bounds, so the rules across fields still see it


def check_list(field: SpecField, raw: Any, errors: Errors, *, at: str = "") -> Any:
    """The list itself (a list, not too long), its items unchecked; or INVALID."""
    if not isinstance(raw, list) or (field.max_length is not None and len(raw) > field.max_length):
        errors.add(at or field.name, invalid_message(field))
        return INVALID
    return raw


def _list(field: SpecField, raw: Any, errors: Errors, at: str) -> Any:
    struct = field.struct
    if struct is None:  # a list of words
        if not isinstance(raw, list) or (field.max_length is not None and len(raw) > field.max_length):
            errors.add(at, field.hints.invalid or f"Must be a list of at most {field.max_length} strings.")
            return INVALID
        if not fits(field, raw):
            item = field.kind.item_type if isinstance(field.kind, mi.ListType) else None
            longest = item.max_length if isinstance(item, mi.StrType) else None
            errors.add(at, f"Every item must be a string of at most {longest} characters.")
            return INVALID
        return list(raw)
    items = check_list(field, raw, errors, at=at)
    if items is INVALID:
        return INVALID
    checked = [check_struct(struct, item, errors, at=at) for item in items]
    return INVALID if any(c is INVALID for c in checked) else checked


def check_struct(
    struct: type[msgspec.Struct], raw: Any, errors: Errors, *, at: str, message: str = ""
) -> Any:
    """A nested Struct from an object, field by field: each field at fault adds its message."""
    fields = fields_of(struct)
    if not isinstance(raw, dict) or not set(raw) <= {f.name for f in fields}:
        errors.add(at, message or f"Must be {{{', '.join(f.name for f in fields)}}}.")
        return INVALID
    values: dict[str, Any] = {}
    for field in fields:
        if field.name not in raw:
            if field.required:
                errors.add(at, invalid_message(field))
                values[field.name] = INVALID
            continue
        values[field.name] = check(field, raw[field.name], errors, at=at)
    if any(v is INVALID for v in values.values()):
        return INVALID
    return struct(**values)
