"""The typed job request: parsed strictly from untrusted input into a `JobSpec`, or rejected.

Unknown keys are refused (so `privileged`, `hostPath`, `nodeName`, `serviceAccountName`,
`tolerations`, `podSpecPatch` ... never get anywhere), types are exact (`"4"`, `0.5` and `true` are
not GPU counts), and every field at fault is named, with its messages, in one ValidationError, so
the API and the form can show each in place. Each field is checked against its declaration
(workloads.spec.checks), then the rules that need the project or the site (workloads.spec.rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from workloads.spec.checks import INVALID, Errors, check, invalid_message
from workloads.spec.declaration import JobSpec
from workloads.spec.fields import FIELD_NAMES, SPEC_FIELDS, SpecField
from workloads.spec.limits import SpecLimits
from workloads.spec.rules import FIELD_RULES, SPEC_RULES


def _declared(field: SpecField, raw: Any, limits: SpecLimits, errors: Errors) -> Any:
    return check(field, raw, errors, maximum=limits.maxima.get(field.name))


def parse_spec(data: Any, limits: SpecLimits) -> JobSpec:
    """A JobSpec from untrusted input, or ValidationError({field: [messages]}) naming every problem."""
    if not isinstance(data, Mapping):
        raise ValidationError({"non_field_errors": ["Send a JSON object."]})
    errors = Errors()
    for key in sorted(set(data) - FIELD_NAMES):
        errors.add(str(key)[:60], "Unknown field; jobs are built from typed fields only.")
    values: dict[str, Any] = {}
    for field in SPEC_FIELDS:
        if field.name in data:
            value = FIELD_RULES.get(field.name, _declared)(field, data[field.name], limits, errors)
            if value is not INVALID:
                values[field.name] = value
        elif field.required:
            errors.add(field.name, invalid_message(field))
    given = {f.name: values.get(f.name, f.default) for f in SPEC_FIELDS}
    for rule in SPEC_RULES:
        rule(given, limits, errors)
    if errors.fields:
        raise ValidationError(errors.fields)
    return JobSpec(**values)
