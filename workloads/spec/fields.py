"""The declaration read back, field by field, for the derivations (msgspec.inspect, public API).

Each `SpecField` is one field of a spec Struct: its type with the Meta and the `| None` taken off
(`kind`: IntType, StrType, ListType, EnumType, StructType, BoolType), whether it may be null, its
default, its words and its hints.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import inspect as mi

from workloads.spec.declaration import HINTS, Hints, JobSpec


@dataclass(frozen=True)
class SpecField:
    name: str
    annotation: Any  # the declared type, as msgspec.convert takes it
    kind: mi.Type
    nullable: bool
    required: bool
    default: Any  # msgspec.NODEFAULT when required
    title: str
    description: str
    examples: tuple[Any, ...]
    hints: Hints

    @property
    def lowest(self) -> int | None:
        return self.kind.ge if isinstance(self.kind, mi.IntType) else None

    @property
    def highest(self) -> int | None:
        return self.kind.le if isinstance(self.kind, mi.IntType) else None

    @property
    def max_length(self) -> int | None:
        kind = self.kind
        return kind.max_length if isinstance(kind, mi.StrType | mi.ListType) else None

    @property
    def struct(self) -> type[msgspec.Struct] | None:
        """The nested Struct: of the field itself, or of its list's items."""
        kind = self.kind.item_type if isinstance(self.kind, mi.ListType) else self.kind
        kind = kind.type if isinstance(kind, mi.Metadata) else kind
        return kind.cls if isinstance(kind, mi.StructType) else None


def _unwrap(kind: mi.Type) -> tuple[mi.Type, bool, dict[str, Any], dict[str, Any]]:
    """The type without its Meta and `| None`: (type, nullable, JSON-schema words, extra)."""
    words: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    nullable = False
    while True:
        if isinstance(kind, mi.Metadata):
            words.update(kind.extra_json_schema or {})
            extra.update(kind.extra or {})
            kind = kind.type
        elif isinstance(kind, mi.UnionType) and any(isinstance(t, mi.NoneType) for t in kind.types):
            others = [t for t in kind.types if not isinstance(t, mi.NoneType)]
            if len(others) != 1:
                raise TypeError(f"{kind}: only `T | None` unions are derived")
            nullable, kind = True, others[0]
        else:
            return kind, nullable, words, extra


def _default(field: mi.Field) -> Any:
    if field.default is not msgspec.NODEFAULT:
        return field.default
    if field.default_factory is not msgspec.NODEFAULT:
        return field.default_factory()
    return msgspec.NODEFAULT


@functools.cache
def fields_of(struct: type[msgspec.Struct]) -> tuple[SpecField, ...]:
    info = mi.type_info(struct)
    assert isinstance(info, mi.StructType)  # noqa: S101 - a Struct's type info
    annotations = {f.name: f.type for f in msgspec.structs.fields(struct)}
    out = []
    for field in info.fields:
        kind, nullable, words, extra = _unwrap(field.type)
        if isinstance(kind, mi.IntType) and (kind.gt, kind.lt, kind.multiple_of) != (None, None, None):
            raise TypeError(f"{struct.__name__}.{field.name}: bound integers with ge and le only")
        out.append(
            SpecField(
                name=field.name,
                annotation=annotations[field.name],
                kind=kind,
                nullable=nullable,
                required=field.required,
                default=_default(field),
                title=str(words.get("title", field.name)),
                description=str(words.get("description", "")),
                examples=tuple(words.get("examples", ())),
                hints=extra.get(HINTS, Hints()),
            )
        )
    return tuple(out)


def field_of(struct: type[msgspec.Struct], name: str) -> SpecField:
    return next(f for f in fields_of(struct) if f.name == name)


def fits(field: SpecField, value: Any) -> bool:
    """Whether the value is of the field's declared type, bounds and pattern, exactly (no coercion)."""
    try:
        msgspec.convert(value, field.annotation, strict=True)
    except msgspec.ValidationError:
        return False
    return True


SPEC_FIELDS = fields_of(JobSpec)
FIELD_NAMES = frozenset(f.name for f in SPEC_FIELDS)
