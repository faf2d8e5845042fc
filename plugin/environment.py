"""Every environment variable the node daemons read, declared once: the command-line flag it is the
default of, its default and what it does.

`python -m plugin` (the device plugin) and `python -m plugin.agent` (the telemetry agent) take each
setting as a flag; the variable, where set, is the flag's default (the chart sets variables), and
the declared default applies where neither is given. argparse converts a variable's text as it
converts the flag's, so a bad value is refused naming the flag. Nothing else in plugin/ reads the
process environment (tests/test_environment.py scans for it), and the operator guide's node table
is these help texts (`make settings-docs`).
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plugin.podresources import DEFAULT_SOCKET
from plugin.registration import DEFAULT_PLUGIN_DIR

PLUGIN = "plugin"
AGENT = "plugin.agent"


@dataclass(frozen=True)
class Option:
    """One flag and the variable that sets its default."""

    flag: str
    env: str
    default: Any
    help: str
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    shown: str | None = None  # the default in words, where the node decides it
    derived: Callable[[], Any] | None = None  # how the node decides it
    tristate: bool = False  # --flag / --no-flag, else the default

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        default = os.environ.get(self.env)
        if default is None:
            default = self.derived() if self.derived is not None else self.default
        kwargs: dict[str, Any] = {"default": default, "help": f"{self.help} (${self.env})"}
        if self.tristate:
            kwargs["action"] = argparse.BooleanOptionalAction
        if self.type is not None:
            kwargs["type"] = self.type
        if self.choices is not None:
            kwargs["choices"] = self.choices
        parser.add_argument(self.flag, **kwargs)


# The NVML backend (plugin/backend.py), both daemons.
BACKEND = Option(
    "--backend",
    "GPU_PORTAL_BACKEND",
    "real",
    "the NVML library, or a simulated node",
    choices=("real", "sim"),
)
SIM_GPUS = Option("--sim-gpus", "GPU_PORTAL_SIM_GPUS", 4, "GPUs of the simulated node", type=int)
SIM_MEMORY_MIB = Option(
    "--sim-memory-mib", "GPU_PORTAL_SIM_MEMORY_MIB", 32768, "memory of each simulated GPU (MiB)", type=int
)
SIM_MODEL = Option(
    "--sim-model", "GPU_PORTAL_SIM_MODEL", "NVIDIA GeForce RTX 5090", "the simulated GPUs' model"
)
SIM_SEED = Option(
    "--sim-seed",
    "GPU_PORTAL_SIM_SEED",
    None,
    "seed of the simulated GPUs' UUIDs and load",
    shown="the host name",
    derived=lambda: os.uname().nodename,
)
SIM_CALL_COST_US = Option(
    "--sim-call-cost-us",
    "GPU_PORTAL_SIM_CALL_COST_US",
    100.0,
    "CPU cost of one simulated NVML call (µs)",
    type=float,
)
LOG_LEVEL = Option("--log-level", "GPU_PORTAL_LOG_LEVEL", "INFO", "the log level")
POD_RESOURCES = Option(
    "--pod-resources-socket",
    "GPU_PORTAL_POD_RESOURCES",
    DEFAULT_SOCKET,
    "the kubelet's PodResources socket (which pod holds which device)",
    type=Path,
)

# The device plugin (python -m plugin).
PLUGIN_DIR = Option(
    "--plugin-dir",
    "GPU_PORTAL_PLUGIN_DIR",
    DEFAULT_PLUGIN_DIR,
    "the kubelet's device-plugin directory (its registration socket)",
    type=Path,
)
SHARING_CONFIG = Option(
    "--config-file",
    "GPU_PORTAL_SHARING_CONFIG",
    None,
    "the per-GPU sharing file the portal writes (a mounted ConfigMap); none: every GPU in the default mode",
    type=Path,
)
SLICES_PER_GPU = Option(
    "--slices-per-gpu",
    "GPU_PORTAL_SLICES_PER_GPU",
    4,
    "MPS slices of a shared GPU the file does not name",
    type=int,
)
DEFAULT_MODE = Option(
    "--default-mode",
    "GPU_PORTAL_DEFAULT_MODE",
    "exclusive",
    "the mode of a GPU the file does not name",
    choices=("exclusive", "shared"),
)
MPS_ROOT = Option(
    "--mps-root",
    "GPU_PORTAL_MPS_ROOT",
    Path("/run/gpu-portal/mps"),
    "where each GPU's MPS daemon keeps its pipes and logs",
    type=Path,
)
ISOLATE_SHM = Option(
    "--isolate-shm",
    "GPU_PORTAL_MPS_ISOLATE_SHM",
    "auto",
    "each MPS daemon in its own mount namespace, the GPU's shm directory its /dev/shm (needs CAP_SYS_ADMIN)",
    shown="on with real NVML, off simulated",
    tristate=True,
)
RECOVERY_S = Option(
    "--recovery-s",
    "GPU_PORTAL_RECOVERY_S",
    300.0,
    "an unhealthy GPU with no new XID this long is offered again",
    type=float,
)

# The telemetry agent (python -m plugin.agent).
PORTAL_URL = Option(
    "--portal-url",
    "GPU_PORTAL_URL",
    None,
    "the portal, e.g. https://portal.example.org; none: serve /metrics only",
)
TOKEN_FILE = Option(
    "--token-file",
    "GPU_PORTAL_TOKEN_FILE",
    None,
    "node token or projected ServiceAccount token; read again before every send (tokens rotate)",
    type=Path,
)
CA_FILE = Option(
    "--ca-file", "GPU_PORTAL_CA_FILE", None, "CA bundle for the portal's TLS; none: the system's"
)
NODE_NAME = Option(
    "--node-name",
    "NODE_NAME",
    None,
    "the node's Kubernetes name (the chart sets it from the pod's node)",
    shown="the host name",
    derived=socket.gethostname,
)
INTERVAL = Option("--interval", "GPU_PORTAL_INTERVAL", 1.0, "seconds between samples", type=float)
METRICS_PORT = Option(
    "--metrics-port", "GPU_PORTAL_METRICS_PORT", 9400, "the port of the agent's /metrics; 0: none", type=int
)
BUFFER_MAX = Option(
    "--buffer-max",
    "GPU_PORTAL_BUFFER_MAX",
    100_000,
    "samples kept while the portal is unreachable (the oldest go first)",
    type=int,
)
PROC_ROOT = Option(
    "--proc-root",
    "GPU_PORTAL_PROC_ROOT",
    Path("/proc"),
    "the host's /proc (which process uses a GPU)",
    type=Path,
)

BACKEND_OPTIONS = (BACKEND, SIM_GPUS, SIM_MEMORY_MIB, SIM_MODEL, SIM_SEED, SIM_CALL_COST_US)
PROGRAMS: dict[str, tuple[Option, ...]] = {
    PLUGIN: (
        *BACKEND_OPTIONS,
        PLUGIN_DIR,
        SHARING_CONFIG,
        SLICES_PER_GPU,
        DEFAULT_MODE,
        POD_RESOURCES,
        MPS_ROOT,
        ISOLATE_SHM,
        RECOVERY_S,
        LOG_LEVEL,
    ),
    AGENT: (
        *BACKEND_OPTIONS,
        PORTAL_URL,
        TOKEN_FILE,
        CA_FILE,
        NODE_NAME,
        INTERVAL,
        METRICS_PORT,
        BUFFER_MAX,
        PROC_ROOT,
        POD_RESOURCES,
        LOG_LEVEL,
    ),
}


def add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    for option in options:
        option.add_to(parser)


def declared() -> list[Option]:
    """Every option once, in the order the programs list them."""
    seen: dict[str, Option] = {}
    for options in PROGRAMS.values():
        for option in options:
            seen.setdefault(option.env, option)
    return list(seen.values())


def programs_of(option: Option) -> list[str]:
    return [name for name, options in PROGRAMS.items() if option in options]
