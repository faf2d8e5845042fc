"""Choosing the NVML backend from the command line: the real library, or the simulated node."""

from __future__ import annotations

import argparse
import os

from plugin import nvml
from plugin.sim.nvml import SimNvml, default_gpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--backend", choices=["real", "sim"], default=env("GPU_PORTAL_BACKEND", "real"))
    parser.add_argument("--sim-gpus", type=int, default=int(env("GPU_PORTAL_SIM_GPUS", "4")))
    parser.add_argument("--sim-memory-mib", type=int, default=int(env("GPU_PORTAL_SIM_MEMORY_MIB", "32768")))
    parser.add_argument("--sim-model", default=env("GPU_PORTAL_SIM_MODEL", "NVIDIA GeForce RTX 5090"))
    parser.add_argument("--sim-seed", default=env("GPU_PORTAL_SIM_SEED", os.uname().nodename))
    parser.add_argument(
        "--sim-call-cost-us",
        type=float,
        default=float(env("GPU_PORTAL_SIM_CALL_COST_US", "100")),
        help="CPU cost of one simulated NVML call",
    )


def make_lib(args: argparse.Namespace) -> tuple[nvml.NvmlLib, SimNvml | None]:
    """Returns the lib and, for the simulation, the SimNvml itself (for allocation feedback)."""
    if args.backend == "real":
        return nvml.load_real(), None
    gpus = default_gpus(args.sim_gpus, args.sim_seed, args.sim_memory_mib)
    for gpu in gpus:
        gpu.name = args.sim_model
    sim = SimNvml(gpus, call_cost_s=args.sim_call_cost_us * 1e-6)
    return sim, sim
