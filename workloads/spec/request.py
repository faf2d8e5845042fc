"""A spec and the request shape it came from: the dict a rerun and a template copy, and the Job row's
values (msgspec's own conversion both ways: Structs to plain JSON values and back)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from workloads.spec.declaration import JobSpec
from workloads.spec.fields import FIELD_NAMES, SPEC_FIELDS


def spec_values(spec: JobSpec) -> dict[str, Any]:
    """Every field as plain JSON values (enums by value, nested Structs as objects)."""
    values: dict[str, Any] = msgspec.to_builtins(spec)
    return values


def spec_request(spec: JobSpec) -> dict[str, Any]:
    """The request that makes this spec again (reruns, templates): every field, except one for the
    site's tests and demo while it has its default, as ordinary specs and templates never carry it."""
    values = spec_values(spec)
    return {
        f.name: values[f.name]
        for f in SPEC_FIELDS
        if not (f.hints.tests_and_demo and getattr(spec, f.name) == f.default)
    }


def spec_from_values(values: Mapping[str, Any]) -> JobSpec:
    """The spec a stored request or a Job row holds; a field it lacks takes its default, a key the
    declaration no longer has is left out. Raises msgspec.ValidationError on a value that does not fit."""
    return msgspec.convert({k: v for k, v in values.items() if k in FIELD_NAMES}, JobSpec)
