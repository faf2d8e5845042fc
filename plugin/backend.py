"""The NVML backend the command line chose (plugin/environment.py: --backend, --sim-*): the real
library, or the simulated node."""

from __future__ import annotations

import argparse

from plugin import nvml
from plugin.sim.nvml import SimNvml, default_gpus


def make_lib(args: argparse.Namespace) -> tuple[nvml.NvmlLib, SimNvml | None]:
    """Returns the lib and, for the simulation, the SimNvml itself (for allocation feedback)."""
    if args.backend == "real":
        return nvml.load_real(), None
    gpus = default_gpus(args.sim_gpus, args.sim_seed, args.sim_memory_mib)
    for gpu in gpus:
        gpu.name = args.sim_model
    sim = SimNvml(gpus, call_cost_s=args.sim_call_cost_us * 1e-6)
    return sim, sim
