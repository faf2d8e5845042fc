"""`python -m plugin.agent`: the NVML telemetry agent."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys

import httpx

from plugin import VERSION, backend, environment, nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.agent.metrics import AgentMetrics
from plugin.agent.runner import Agent
from plugin.agent.sender import SampleBuffer, Sender, TokenFile


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m plugin.agent", description=__doc__)
    environment.add_options(p, environment.PROGRAMS[environment.AGENT])
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
