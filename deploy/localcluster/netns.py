"""The test run's own network namespace, where the optional real node and all it talks to live.

The kubelet refuses a loopback node IP, and test traffic on this machine may only go to loopback or
to addresses inside namespaces the run made itself. So the real-node tests run wholly inside one
(control plane, Postgres, Redis, containerd, the kubelet and its pods' bridge): loopback up, a veth
pair whose one end holds the node's address, and a default route through it, which kube-apiserver
and the kubelet need to pick an address. Nothing routes out: the host's interfaces are untouched.

    python -m deploy.localcluster.netns run [--name N] [--forward PORT] -- COMMAND...
    python -m deploy.localcluster.netns exec [--name N] -- COMMAND...

`run` makes the namespace, runs COMMAND inside it (only the network namespace changes, so the
files, cgroups and mounts are the host's), and removes the namespace after, whatever COMMAND did;
`--forward PORT` lets the host's 127.0.0.1:PORT reach the namespace's (the demo's browser). `exec`
runs another command (kubectl, a shell) in the namespace while `run`'s command holds it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import deploy.localcluster.forward as forwarder

NETNS_DIR = Path("/run/netns")
NODE_IP = "10.213.0.2"
NODE_PREFIX = 24
NODE_LINK, PEER_LINK = "rn-node", "rn-peer"
ENV = "GPUPORTAL_NETNS"
DEFAULT_NAME = "gpuportal-realnode"


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


def create(name: str) -> None:
    """A fresh namespace `name` (a stale one of that name is replaced)."""
    delete(name)
    netns_dir_existed = NETNS_DIR.exists()
    _ip("netns", "add", name)
    if not netns_dir_existed:
        (NETNS_DIR.parent / f".{NETNS_DIR.name}.gpuportal-made").touch()
    _ip("-n", name, "link", "set", "lo", "up")
    _ip("-n", name, "link", "add", NODE_LINK, "type", "veth", "peer", "name", PEER_LINK)
    _ip("-n", name, "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", NODE_LINK)
    _ip("-n", name, "link", "set", NODE_LINK, "up")
    _ip("-n", name, "link", "set", PEER_LINK, "up")
    _ip("-n", name, "route", "add", "default", "dev", NODE_LINK)


def delete(name: str) -> None:
    """Remove the namespace, and /run/netns too when our `create` made it (it is a mount point)."""
    if (NETNS_DIR / name).exists():
        _ip("netns", "del", name)
    marker = NETNS_DIR.parent / f".{NETNS_DIR.name}.gpuportal-made"
    if marker.exists() and NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()):
        subprocess.run(["umount", str(NETNS_DIR)], capture_output=True, check=False)
        NETNS_DIR.rmdir()
        marker.unlink()


def exec_prefix(name: str) -> list[str]:
    """Run a command in the namespace: only the network namespace changes (not `ip netns exec`,
    which also remounts /sys and so hides the cgroup hierarchy the kubelet needs)."""
    return ["nsenter", f"--net={NETNS_DIR / name}", "--"]


def current() -> str | None:
    """The name of the run's namespace this process is in, or None when it is in another."""
    name = os.environ.get(ENV)
    if not name or not (NETNS_DIR / name).exists():
        return None
    if (NETNS_DIR / name).stat().st_ino != Path("/proc/self/ns/net").stat().st_ino:
        return None
    return name


def run(name: str, command: list[str], forward: list[int] | None = None) -> int:
    create(name)
    stops = []
    try:
        stops = [forwarder.start(NETNS_DIR / name, port) for port in forward or []]
        return enter(name, command)
    finally:
        for stop in stops:
            stop.set()
        delete(name)


def enter(name: str, command: list[str]) -> int:
    """Run a command in the existing namespace `name` (a second shell beside `run`'s command)."""
    if not (NETNS_DIR / name).exists():
        raise SystemExit(f"no namespace {name}: start one with `python -m deploy.localcluster.netns run`")
    env = {**os.environ, ENV: name}
    child = subprocess.Popen([*exec_prefix(name), *command], env=env)
    # SIGTERM ends the command, then `run` removes the namespace (Python's default would skip that).
    # SIGINT (Ctrl-C, or `make test` passing one on) reaches the command through its process group:
    # this process waits for it to finish its own clean-up rather than leaving it behind.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.terminate())
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deploy.localcluster.netns", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a command inside a fresh namespace")
    r.add_argument("--forward", type=int, action="append", help="forward host 127.0.0.1:PORT inside")
    e = sub.add_parser("exec", help="run a command inside the namespace a `run` made")
    for parser in (r, e):
        parser.add_argument("--name", default=DEFAULT_NAME)
        parser.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the command to run after --")
    if args.cmd == "exec":
        return enter(args.name, command)
    return run(args.name, command, args.forward)


if __name__ == "__main__":
    sys.exit(main())
