"""The spec's rules beyond its declared types: the project's image allow-list and volumes, the
site's switches, reserved and repeated names, and GPUs or slices. Each rule also keeps the
conveniences a request may use (env as a `{NAME: value}` object, any spelling of a mount path).

A field rule takes the field's raw value and returns its value (or INVALID), adding its messages
to Errors; it runs instead of the plain declared check (workloads.spec.checks.check), which it
calls itself first where the declared type comes first.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from workloads.choices import Placement
from workloads.images import allowed_text, image_allowed, parse_image
from workloads.spec.checks import INVALID, Errors, check, check_list
from workloads.spec.declaration import LAUNCH_ENV, RESERVED_ENV_PREFIXES, EnvVar, VolumeMount
from workloads.spec.fields import SpecField, field_of, fields_of, fits
from workloads.spec.limits import SpecLimits

FORBIDDEN_MOUNTS = ("/proc", "/sys", "/dev", "/etc", "/var/run", "/run", "/bin", "/lib", "/usr")

FieldRule = Callable[[SpecField, Any, SpecLimits, Errors], Any]


def image(field: SpecField, raw: Any, limits: SpecLimits, errors: Errors) -> Any:
    value = check(field, raw, errors)
    if value is INVALID:
        return INVALID
    ref = parse_image(value)
    if ref is None:
        errors.add(field.name, "Give a full reference: registry/repository[:tag][@sha256:digest].")
    elif not image_allowed(ref, limits.images):
        refused = f"{ref.registry}/{ref.repository} is not on this project's image allow-list."
        errors.add(field.name, f"{refused} {allowed_text(limits.images)}")
    return value


def env(field: SpecField, raw: Any, limits: SpecLimits, errors: Errors) -> Any:
    if isinstance(raw, dict):  # {"NAME": "value"} is accepted as a convenience
        raw = [{"name": k, "value": v} for k, v in raw.items()]
    items = check_list(field, raw, errors)
    if items is INVALID:
        return INVALID
    out: list[EnvVar] = []
    for item in items:
        message = _env_item_error(item)
        if message:
            errors.add(field.name, message)
        else:
            out.append(EnvVar(name=item["name"], value=item["value"]))
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        errors.add(field.name, "Each variable may appear once.")
    return out


def _env_item_error(item: Any) -> str | None:
    if not isinstance(item, dict) or set(item) != {f.name for f in fields_of(EnvVar)}:
        return "Each variable is exactly {name, value}; references to secrets or fields are not allowed."
    name, value = item["name"], item["value"]
    if not fits(field_of(EnvVar, "name"), name):
        return f"{str(name)[:40]!r} is not a valid variable name (letters, digits, '_')."
    if name.upper().startswith(RESERVED_ENV_PREFIXES):
        *first, last = RESERVED_ENV_PREFIXES
        return f"{name}: names starting with {', '.join(first)} or {last} are reserved."
    if not fits(field_of(EnvVar, "value"), value):
        longest = field_of(EnvVar, "value").max_length
        return f"{name}: the value must be a string of at most {longest} characters."
    return None


def mount_path_normal(path: Any) -> str | None:
    """The path as the container will see it, or None if it is not absolute or climbs with '..'.

    The deny list compares this form: `/./etc`, `//etc` and `/etc/` all land on `/etc`.
    """
    if not fits(field_of(VolumeMount, "mount_path"), path) or ".." in path.split("/"):
        return None
    # normpath keeps a leading '//' (POSIX leaves it implementation-defined); the kubelet does not.
    return "/" + posixpath.normpath(str(path)).lstrip("/")


def _volume_item_error(item: Any, volumes: Mapping[str, bool]) -> str | None:
    names = [f.name for f in fields_of(VolumeMount)]
    if not isinstance(item, dict) or not set(item) <= set(names):
        return f"Each volume is {{{', '.join(names)}}}; only the project's own volumes."
    name, path, read_only = item.get("volume"), item.get("mount_path"), item.get("read_only", False)
    if not isinstance(name, str) or name not in volumes:
        return f"{str(name)[:40]!r} is not one of this project's volumes."
    normal = mount_path_normal(path)
    if normal is None:
        return f"{name}: the mount path must be an absolute path without '..'."
    if normal == "/" or any(normal == p or normal.startswith(p + "/") for p in FORBIDDEN_MOUNTS):
        return f"{name}: cannot mount over {normal}."
    if not fits(field_of(VolumeMount, "read_only"), read_only):
        return f"{name}: read_only must be true or false."
    if volumes[name] and "read_only" in item and not read_only:
        # Asked read-write, would get read-only: refuse, so nothing writes where it thinks it can.
        return f"{name} is read-only in this project: mount it with read_only true."
    return None


def volumes(field: SpecField, raw: Any, limits: SpecLimits, errors: Errors) -> Any:
    items = check_list(field, raw, errors)
    if items is INVALID:
        return INVALID
    out: list[VolumeMount] = []
    for item in items:
        message = _volume_item_error(item, limits.volumes)
        if message:
            errors.add(field.name, message)
            continue
        name = item["volume"]
        read_only = bool(item.get("read_only", False)) or limits.volumes[name]
        path = mount_path_normal(item["mount_path"])
        out.append(VolumeMount(volume=name, mount_path=str(path), read_only=read_only))
    paths = [v.mount_path for v in out]
    if len(set(paths)) != len(paths):
        errors.add(field.name, "Each mount path may be used once.")
    return out


def placement(field: SpecField, raw: Any, limits: SpecLimits, errors: Errors) -> Any:
    value = check(field, raw, errors)
    if value == Placement.REAL_NODE and not limits.real_node:
        errors.add(field.name, "This site has no real test node; leave placement out.")
        return INVALID
    return value


def simulate(field: SpecField, raw: Any, limits: SpecLimits, errors: Errors) -> Any:
    if raw is None:
        return None
    if not limits.simulation:
        errors.add(field.name, "Simulation is switched off on this site.")
        return INVALID
    return check(field, raw, errors)


FIELD_RULES: dict[str, FieldRule] = {
    "image": image,
    "env": env,
    "volumes": volumes,
    "placement": placement,
    "simulate": simulate,
}


def gpus_or_slices(values: Mapping[str, Any], limits: SpecLimits, errors: Errors) -> None:
    if values["gpus"] and values["mps_slices"]:
        errors.add("mps_slices", "Ask for whole GPUs or MPS slices, not both.")


def workers(values: Mapping[str, Any], limits: SpecLimits, errors: Errors) -> None:
    """Several workers: whole GPUs only (an MPS slice cannot span nodes), and all of them together
    within the project's quota, or the job could never start."""
    count = values["workers"]
    if not isinstance(count, int) or count <= 1:
        return
    if values["mps_slices"]:
        errors.add("mps_slices", "MPS slices are for a job of one worker; give each worker whole GPUs.")
    taken = sorted({e.name for e in values["env"] if isinstance(e, EnvVar)} & set(LAUNCH_ENV))
    if taken:
        errors.add("env", f"{', '.join(taken)}: set by the portal for each worker of a job of several.")
    for name, unit in (("gpus", "GPUs"), ("cpu_millicores", "millicores of CPU"), ("memory_mib", "MiB")):
        top, each = limits.totals.get(name), values[name]
        if top is not None and isinstance(each, int) and each * count > top:
            errors.add(
                "workers",
                f"{count} workers of {each} {unit} is {each * count} {unit}, more than this project's "
                f"quota of {top}: ask for fewer workers or less per worker.",
            )


# Rules across fields: they see every field's value (its default where it was left out or refused).
SPEC_RULES: tuple[Callable[[Mapping[str, Any], SpecLimits, Errors], None], ...] = (gpus_or_slices, workers)
