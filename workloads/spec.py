"""The typed job request: parsed strictly from untrusted input into a `JobSpec`, or rejected.

Pure: no database, no cluster. Unknown keys are refused (so `privileged`, `hostPath`,
`nodeName`, `serviceAccountName`, `tolerations`, `podSpecPatch` ... never get anywhere), types are
exact (`"4"`, `0.5` and `true` are not GPU counts), and each error names its field so the API and
the form can show it in place.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from workloads.choices import Placement, Priority
from workloads.images import allowed_text, image_allowed, parse_image

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV_PREFIXES = ("KUBERNETES_", "NVIDIA_", "CUDA_")
GPU_TYPE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
MOUNT_PATH = re.compile(r"^/[A-Za-z0-9._/-]{0,250}$")
FORBIDDEN_MOUNTS = ("/proc", "/sys", "/dev", "/etc", "/var/run", "/run", "/bin", "/lib", "/usr")
MAX_LIST, MAX_STR = 64, 4096
SPEC_KEYS = frozenset(
    {
        "name",
        "image",
        "command",
        "args",
        "env",
        "gpus",
        "gpu_type",
        "mps_slices",
        "cpu_millicores",
        "memory_mib",
        "volumes",
        "priority",
        "max_runtime_minutes",
        "preemptible",
        "interactive",
        "simulate",
        "placement",
    }
)


@dataclass(frozen=True)
class SpecLimits:
    """What the project (and the site) allow one job to ask for."""

    images: frozenset[tuple[str, str]]
    volumes: Mapping[str, bool]  # volume name -> read-only enforced
    max_gpus: int
    max_mps_slices: int
    max_cpu_millicores: int
    max_memory_mib: int
    max_runtime_minutes: int
    simulation: bool = False
    real_node: bool = False  # the "real-node" placement may be asked for (tests, demo)


@dataclass(frozen=True)
class JobSpec:
    image: str
    name: str = ""
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: list[dict[str, str]] = field(default_factory=list)
    gpus: int = 0
    gpu_type: str = ""
    mps_slices: int = 0
    cpu_millicores: int = 1000
    memory_mib: int = 4096
    volumes: list[dict[str, Any]] = field(default_factory=list)
    priority: str = Priority.NORMAL.value
    max_runtime_minutes: int = 60
    preemptible: bool = False
    interactive: bool = False
    sim_run_seconds: int | None = None
    sim_exit_code: int | None = None
    placement: str = Placement.ANY.value

    def as_fields(self) -> dict[str, Any]:
        return asdict(self)

    def as_request(self) -> dict[str, Any]:
        """The request shape again (for templates and rerun-with-edits)."""
        data = {k: v for k, v in asdict(self).items() if not k.startswith("sim_")}
        if not self.placement:
            del data["placement"]  # tests and demo only: not in ordinary specs and templates
        if self.sim_run_seconds is not None or self.sim_exit_code is not None:
            data["simulate"] = {"run_seconds": self.sim_run_seconds, "exit_code": self.sim_exit_code}
        return data


class _Errors:
    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.fields.setdefault(name, []).append(message)


def _int(data: Mapping[str, Any], key: str, default: int, lo: int, hi: int, errors: _Errors) -> int:
    value = data.get(key, default)
    if type(value) is not int:  # bool, float and "4" are refused on purpose
        errors.add(key, "Must be a whole number.")
        return default
    if not lo <= value <= hi:
        errors.add(key, f"Must be between {lo} and {hi}.")
    return value


def _strings(data: Mapping[str, Any], key: str, errors: _Errors) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_LIST:
        errors.add(key, f"Must be a list of at most {MAX_LIST} strings.")
        return []
    if not all(isinstance(v, str) and len(v) <= MAX_STR and "\x00" not in v for v in value):
        errors.add(key, f"Every item must be a string of at most {MAX_STR} characters.")
        return []
    return list(value)


def _env(data: Mapping[str, Any], errors: _Errors) -> list[dict[str, str]]:
    value = data.get("env", [])
    if isinstance(value, dict):  # {"NAME": "value"} is accepted as a convenience
        value = [{"name": k, "value": v} for k, v in value.items()]
    if not isinstance(value, list) or len(value) > MAX_LIST:
        errors.add("env", f"Must be a list of at most {MAX_LIST} {{name, value}} pairs.")
        return []
    out: list[dict[str, str]] = []
    for item in value:
        message = _env_item_error(item)
        if message:
            errors.add("env", message)
        else:
            out.append({"name": item["name"], "value": item["value"]})
    names = [e["name"] for e in out]
    if len(set(names)) != len(names):
        errors.add("env", "Each variable may appear once.")
    return out


def _env_item_error(item: Any) -> str | None:
    if not isinstance(item, dict) or set(item) != {"name", "value"}:
        return "Each variable is exactly {name, value}; references to secrets or fields are not allowed."
    name, value = item["name"], item["value"]
    if not isinstance(name, str) or not ENV_NAME.match(name) or len(name) > 128:
        return f"{str(name)[:40]!r} is not a valid variable name (letters, digits, '_')."
    if name.upper().startswith(RESERVED_ENV_PREFIXES):
        return f"{name}: names starting with KUBERNETES_, NVIDIA_ or CUDA_ are reserved."
    if not isinstance(value, str) or len(value) > MAX_STR or "\x00" in value:
        return f"{name}: the value must be a string of at most {MAX_STR} characters."
    return None


def _image(data: Mapping[str, Any], limits: SpecLimits, errors: _Errors) -> str:
    value = data.get("image")
    if not isinstance(value, str) or not value:
        errors.add("image", "Name an image, e.g. registry.example.com/team/train:1.0.")
        return ""
    ref = parse_image(value)
    if ref is None:
        errors.add("image", "Give a full reference: registry/repository[:tag][@sha256:digest].")
    elif not image_allowed(ref, limits.images):
        refused = f"{ref.registry}/{ref.repository} is not on this project's image allow-list."
        errors.add("image", f"{refused} {allowed_text(limits.images)}")
    return value


def mount_path_normal(path: Any) -> str | None:
    """The path as the container will see it, or None if it is not absolute or climbs with '..'.

    The deny list compares this form: `/./etc`, `//etc` and `/etc/` all land on `/etc`.
    """
    if not isinstance(path, str) or not MOUNT_PATH.match(path) or ".." in path.split("/"):
        return None
    # normpath keeps a leading '//' (POSIX leaves it implementation-defined); the kubelet does not.
    return "/" + posixpath.normpath(path).lstrip("/")


def _volume_item_error(item: Any, limits: SpecLimits) -> str | None:
    if not isinstance(item, dict) or not set(item) <= {"volume", "mount_path", "read_only"}:
        return "Each volume is {volume, mount_path, read_only}; only the project's own volumes."
    name, path, read_only = item.get("volume"), item.get("mount_path"), item.get("read_only", False)
    if not isinstance(name, str) or name not in limits.volumes:
        return f"{str(name)[:40]!r} is not one of this project's volumes."
    normal = mount_path_normal(path)
    if normal is None:
        return f"{name}: the mount path must be an absolute path without '..'."
    if normal == "/" or any(normal == p or normal.startswith(p + "/") for p in FORBIDDEN_MOUNTS):
        return f"{name}: cannot mount over {normal}."
    if not isinstance(read_only, bool):
        return f"{name}: read_only must be true or false."
    if limits.volumes[name] and "read_only" in item and not read_only:
        # Asked read-write, would get read-only: refuse, so nothing writes where it thinks it can.
        return f"{name} is read-only in this project: mount it with read_only true."
    return None


def _volumes(data: Mapping[str, Any], limits: SpecLimits, errors: _Errors) -> list[dict[str, Any]]:
    value = data.get("volumes", [])
    if not isinstance(value, list) or len(value) > 16:
        errors.add("volumes", "Must be a list of at most 16 volumes.")
        return []
    out: list[dict[str, Any]] = []
    for item in value:
        message = _volume_item_error(item, limits)
        if message:
            errors.add("volumes", message)
            continue
        forced = limits.volumes[item["volume"]]
        read_only = bool(item.get("read_only", False)) or forced
        path = mount_path_normal(item["mount_path"])
        out.append({"volume": item["volume"], "mount_path": path, "read_only": read_only})
    paths = [v["mount_path"] for v in out]
    if len(set(paths)) != len(paths):
        errors.add("volumes", "Each mount path may be used once.")
    return out


def _bool(data: Mapping[str, Any], key: str, errors: _Errors) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        errors.add(key, "Must be true or false.")
        return False
    return value


def _gpus(data: Mapping[str, Any], limits: SpecLimits, errors: _Errors) -> tuple[int, str, int]:
    gpus = _int(data, "gpus", 0, 0, limits.max_gpus, errors)
    slices = _int(data, "mps_slices", 0, 0, limits.max_mps_slices, errors)
    if gpus and slices:
        errors.add("mps_slices", "Ask for whole GPUs or MPS slices, not both.")
    gpu_type = data.get("gpu_type", "")
    if not isinstance(gpu_type, str) or (gpu_type and not GPU_TYPE.match(gpu_type)):
        errors.add("gpu_type", "A GPU product name such as NVIDIA-GeForce-RTX-5090.")
        gpu_type = ""
    return gpus, gpu_type, slices


def _simulation(
    data: Mapping[str, Any], limits: SpecLimits, errors: _Errors
) -> tuple[int | None, int | None]:
    sim = data.get("simulate")
    if sim is None:
        return None, None
    if not limits.simulation:
        errors.add("simulate", "Simulation is switched off on this site.")
        return None, None
    if not isinstance(sim, dict) or not set(sim) <= {"run_seconds", "exit_code"}:
        errors.add("simulate", "Must be {run_seconds, exit_code}.")
        return None, None
    run, code = sim.get("run_seconds"), sim.get("exit_code")
    if run is not None and (type(run) is not int or not 0 <= run <= 86400):
        errors.add("simulate", "run_seconds must be a whole number of seconds.")
    if code is not None and (type(code) is not int or not 0 <= code <= 255):
        errors.add("simulate", "exit_code must be between 0 and 255.")
    return run, code


def _placement(data: Mapping[str, Any], limits: SpecLimits, errors: _Errors) -> str:
    placement = data.get("placement", Placement.ANY.value)
    if placement not in Placement.values:
        errors.add("placement", f"Leave it out, or {Placement.REAL_NODE.value!r} (tests and demo only).")
        return Placement.ANY.value
    if placement == Placement.REAL_NODE and not limits.real_node:
        errors.add("placement", "This site has no real test node; leave placement out.")
        return Placement.ANY.value
    return str(placement)


def parse_spec(data: Any, limits: SpecLimits) -> JobSpec:
    """A JobSpec from untrusted input, or ValidationError({field: [messages]}) naming every problem."""
    if not isinstance(data, Mapping):
        raise ValidationError({"non_field_errors": ["Send a JSON object."]})
    errors = _Errors()
    for key in sorted(set(data) - SPEC_KEYS):
        errors.add(str(key)[:60], "Unknown field; jobs are built from typed fields only.")
    name = data.get("name", "")
    if not isinstance(name, str) or len(name) > 80:
        errors.add("name", "At most 80 characters.")
        name = ""
    priority = data.get("priority", Priority.NORMAL.value)
    if priority not in Priority.values:
        errors.add("priority", f"One of {', '.join(Priority.values)}.")
    preemptible, interactive = _bool(data, "preemptible", errors), _bool(data, "interactive", errors)
    gpus, gpu_type, slices = _gpus(data, limits, errors)
    sim_run, sim_code = _simulation(data, limits, errors)
    spec = JobSpec(
        image=_image(data, limits, errors),
        name=name,
        command=_strings(data, "command", errors),
        args=_strings(data, "args", errors),
        env=_env(data, errors),
        gpus=gpus,
        gpu_type=gpu_type,
        mps_slices=slices,
        cpu_millicores=_int(data, "cpu_millicores", 1000, 100, limits.max_cpu_millicores, errors),
        memory_mib=_int(data, "memory_mib", 4096, 64, limits.max_memory_mib, errors),
        volumes=_volumes(data, limits, errors),
        priority=str(priority),
        max_runtime_minutes=_int(data, "max_runtime_minutes", 60, 1, limits.max_runtime_minutes, errors),
        preemptible=preemptible,
        interactive=interactive,
        sim_run_seconds=sim_run,
        sim_exit_code=sim_code,
        placement=_placement(data, limits, errors),
    )
    if errors.fields:
        raise ValidationError(errors.fields)
    return spec
