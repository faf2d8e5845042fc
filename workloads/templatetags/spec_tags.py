"""A stored job request in one line, for the templates page."""

from __future__ import annotations

import shlex
from typing import Any

from django import template

register = template.Library()


def _resources(spec: dict[str, Any]) -> str:
    gpus, slices = spec.get("gpus") or 0, spec.get("mps_slices") or 0
    if gpus:
        gpu = f"{gpus} GPU{'s' if gpus != 1 else ''}" + (
            f" ({spec['gpu_type']})" if spec.get("gpu_type") else ""
        )
    else:
        gpu = f"{slices} MPS slices" if slices else "no GPU"
    cpu, memory = spec.get("cpu_millicores", 1000), spec.get("memory_mib", 4096)
    return f"{gpu}, {cpu}m CPU, {memory} MiB, at most {spec.get('max_runtime_minutes', 60)} min"


@register.filter
def spec_summary(spec: Any) -> str:
    """Image, command, resources and volumes of a request (as parse_spec returns it)."""
    if not isinstance(spec, dict):
        return ""
    parts = [str(spec.get("image", ""))]
    command = shlex.join([*(spec.get("command") or []), *(spec.get("args") or [])])
    if command:
        parts.append(command)
    parts.append(_resources(spec))
    volumes = spec.get("volumes") or []
    if volumes:
        parts.append(", ".join(f"{v['volume']} at {v['mount_path']}{' (ro)' if v.get('read_only') else ''}"
                               for v in volumes))  # fmt: skip
    return " · ".join(parts)
