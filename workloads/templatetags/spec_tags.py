"""A stored job request in one line, for the templates page."""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
from django import template

from workloads.spec import JobSpec, spec_from_values

register = template.Library()


def _resources(spec: JobSpec) -> str:
    if spec.gpus:
        gpu = f"{spec.gpus} GPU{'s' if spec.gpus != 1 else ''}" + (
            f" ({spec.gpu_type})" if spec.gpu_type else ""
        )
    else:
        gpu = f"{spec.mps_slices} MPS slices" if spec.mps_slices else "no GPU"
    return f"{gpu}, {spec.cpu_millicores}m CPU, {spec.memory_mib} MiB, at most {spec.max_runtime_minutes} min"


@register.filter
def spec_summary(request: Any) -> str:
    """Image, command, resources and volumes of a stored request (a field it leaves out has its default)."""
    try:
        spec = spec_from_values(request)
    except (msgspec.ValidationError, AttributeError, TypeError):
        return ""
    parts = [spec.image]
    command = shlex.join([*spec.command, *spec.args])
    if command:
        parts.append(command)
    parts.append(_resources(spec))
    if spec.volumes:
        mounts = [f"{v.volume} at {v.mount_path}{' (ro)' if v.read_only else ''}" for v in spec.volumes]
        parts.append(", ".join(mounts))
    return " · ".join(parts)
