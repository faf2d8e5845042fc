"""`python -m plugin.agent`: the NVML telemetry agent."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import httpx

from plugin import VERSION, backend, nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.agent.metrics import AgentMetrics
from plugin.agent.runner import Agent
from plugin.agent.sender import SampleBuffer, Sender, TokenFile
from plugin.podresources import DEFAULT_SOCKET


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="python -m plugin.agent", description=__doc__)
    backend.add_arguments(p)
    p.add_argument("--portal-url", default=env("GPU_PORTAL_URL"), help="e.g. https://portal.example.org")
    p.add_argument(
        "--token-file",
        type=Path,
        default=env("GPU_PORTAL_TOKEN_FILE"),
        help="node token or projected ServiceAccount token; read again before every send (tokens rotate)",
    )
    p.add_argument("--ca-file", default=env("GPU_PORTAL_CA_FILE"), help="CA bundle for the portal's TLS")
    p.add_argument("--node-name", default=env("NODE_NAME", socket.gethostname()))
    p.add_argument("--interval", type=float, default=float(env("GPU_PORTAL_INTERVAL", "1.0")))
    p.add_argument("--metrics-port", type=int, default=int(env("GPU_PORTAL_METRICS_PORT", "9400")))
    p.add_argument("--buffer-max", type=int, default=int(env("GPU_PORTAL_BUFFER_MAX", "100000")))
    p.add_argument("--proc-root", type=Path, default=Path(env("GPU_PORTAL_PROC_ROOT", "/proc")))
    p.add_argument(
        "--pod-resources-socket",
        type=Path,
        default=Path(env("GPU_PORTAL_POD_RESOURCES", str(DEFAULT_SOCKET))),
    )
    p.add_argument("--log-level", default=env("GPU_PORTAL_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def build(args: argparse.Namespace, lib: nvml.NvmlLib) -> Agent:
    collector = Collector(lib, Attributor(args.proc_root, args.pod_resources_socket))
    buffer = SampleBuffer(args.buffer_max)
    sender = None
    if args.portal_url:
        token = TokenFile(args.token_file) if args.token_file else ""
        client = httpx.Client(timeout=10.0, verify=args.ca_file or True)
        sender = Sender(
            buffer,
            portal_url=args.portal_url,
            token=token,
            node=args.node_name,
            agent_version=VERSION,
            client=client,
        )
    else:
        logging.warning("no --portal-url: serving /metrics only")
    metrics = AgentMetrics(args.node_name, collector.names)
    return Agent(collector, buffer, sender, metrics, interval_s=args.interval)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        lib, _ = backend.make_lib(args)
    except nvml.NvmlUnavailable as exc:
        logging.error("%s", exc)
        return 2
    agent = build(args, lib)
    if args.metrics_port:
        agent.metrics.serve(args.metrics_port)
    signal.signal(signal.SIGTERM, lambda *_: agent.request_stop())
    agent.start()
    with contextlib.suppress(KeyboardInterrupt):
        agent.wait()
    agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
