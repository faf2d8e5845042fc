"""`python -m plugin`: the kubelet device plugin daemon (nvidia.com/gpu and nvidia.com/gpu.shared)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys

from plugin import backend, environment, mps, nvml
from plugin.daemon import PluginConfig, PluginDaemon
from plugin.server import OnGrant
from plugin.sim.nvml import SimNvml


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m plugin", description=__doc__)
    environment.add_options(p, environment.PROGRAMS[environment.PLUGIN])
    return p.parse_args(argv)


def _feedback(sim: SimNvml) -> OnGrant:
    """Simulated utilisation follows what the kubelet hands out."""

    def on_grant(fractions: dict[str, float]) -> None:
        for uuid, fraction in fractions.items():
            sim.note_allocation(uuid, fraction)

    return on_grant


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        lib, sim = backend.make_lib(args)
    except nvml.NvmlUnavailable as exc:
        logging.error("%s", exc)
        return 2
    cfg = PluginConfig(
        plugin_dir=args.plugin_dir,
        config_file=args.config_file,
        slices_per_gpu=args.slices_per_gpu,
        default_shared=args.default_mode == "shared",
        pod_resources_socket=args.pod_resources_socket,
        mps_root=args.mps_root,
        mps_command=list(mps.REAL_COMMAND if sim is None else mps.STANDIN_COMMAND),
        mps_control=list(mps.REAL_CONTROL if sim is None else mps.STANDIN_CONTROL),
        isolate_shm=sim is None if args.isolate_shm == "auto" else args.isolate_shm in (True, "1", "true"),
        recovery_s=args.recovery_s,
    )
    daemon = PluginDaemon(lib, cfg, on_grant=None if sim is None else _feedback(sim))
    signal.signal(signal.SIGTERM, lambda *_: daemon.request_stop())
    daemon.start()
    with contextlib.suppress(KeyboardInterrupt):
        daemon.wait()
    daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
