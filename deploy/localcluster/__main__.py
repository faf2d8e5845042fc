"""`python -m deploy.localcluster up|down|status|scale`: the Makefile's cluster-up/cluster-down.

`up` prints progress on stderr and the kubeconfig path as its last stdout line, so scripts can do
KUBECONFIG=$(make -s cluster-up | tail -1).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from deploy.localcluster import paths
from deploy.localcluster.cluster import (
    DEFAULT_NAME,
    ClusterHandle,
    create_gpu_nodes,
    load_handle,
    save_handle,
    start_cluster,
    stop_cluster,
)
from deploy.localcluster.nodes import GpuNodeSpec, delete_nodes, node_names, ready_node_names
from deploy.localcluster.realnode import real_node_with_plugin


def _say(msg: str) -> None:
    print(f"[localcluster] {msg}", file=sys.stderr, flush=True)


def _require(name: str) -> ClusterHandle:
    handle = load_handle(name)
    if handle is None:
        sys.exit(f"no cluster {name!r} under {paths.run_dir()}; run `make cluster-up`")
    return handle


def cmd_up(args: argparse.Namespace) -> None:
    _say(f"starting cluster {args.name!r} with {args.nodes} GPU nodes (binaries: {paths.require_binaries()})")
    spec = GpuNodeSpec(slices_per_gpu=args.slices)
    handle = start_cluster(name=args.name, nodes=args.nodes, node_spec=spec)
    t = handle.timings
    _say(f"control plane up in {t['start_s']} s, nodes Ready in {t['nodes_ready_s']} s")
    if args.real_node:
        _hold_with_real_node(handle)
        return
    print(handle.kubeconfig)


def _hold_with_real_node(handle: ClusterHandle) -> None:
    """The real node lives only as long as this process: it holds until Ctrl-C or SIGTERM, then
    stops the node (the host as found) and the cluster."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        with real_node_with_plugin(handle) as node:
            _say(f"real node {node.name} Ready in {node.timings['ready_s']} s (containerd, kubelet, plugin)")
            kubectl = f"python -m deploy.localcluster.netns exec -- {handle.bin_dir}/kubectl"
            _say(f"inside the run's namespace: {kubectl} --kubeconfig {handle.kubeconfig} get nodes")
            _say("Ctrl-C stops the real node and the cluster")
            print(handle.kubeconfig, flush=True)
            stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_cluster(handle.name, handle.run_dir)


def cmd_down(args: argparse.Namespace) -> None:
    late = stop_cluster(args.name)
    _say(f"cluster {args.name!r} deleted" + (f" (killed leftover pids {late})" if late else ""))


def cmd_status(args: argparse.Namespace) -> None:
    handle = _require(args.name)
    with handle.api() as api:
        ready = len(ready_node_names(api))
    rss = handle.rss_bytes()
    print(f"kubeconfig: {handle.kubeconfig}\nready nodes: {ready}")
    for comp, b in sorted(rss.items()):
        print(f"rss {comp}: {b / 2**20:.0f} MiB")
    print(f"rss total: {sum(rss.values()) / 2**20:.0f} MiB")


def cmd_scale(args: argparse.Namespace) -> None:
    """Grow or shrink the GPU node set to --nodes; reports the time until all are Ready."""
    handle = _require(args.name)
    spec = GpuNodeSpec(slices_per_gpu=args.slices)
    have = len(handle.nodes)
    if args.nodes > have:
        _, secs = create_gpu_nodes(
            handle.kubeconfig, args.nodes - have, spec, start=have, timeout=args.timeout
        )
        _say(f"{args.nodes - have} nodes Ready in {secs:.1f} s")
    elif args.nodes < have:
        t0 = time.monotonic()
        with handle.api() as api:
            delete_nodes(api, node_names(have - args.nodes, spec, start=args.nodes))
        _say(f"deleted {have - args.nodes} nodes in {time.monotonic() - t0:.1f} s")
    save_handle(
        ClusterHandle(
            handle.name,
            handle.kubeconfig,
            handle.run_dir,
            handle.bin_dir,
            node_names(args.nodes, spec),
            handle.timings,
        )
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m deploy.localcluster")
    parser.add_argument("--name", default=DEFAULT_NAME)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd, fn in (("up", cmd_up), ("down", cmd_down), ("status", cmd_status), ("scale", cmd_scale)):
        p = sub.add_parser(cmd)
        p.set_defaults(fn=fn)
        if cmd in ("up", "scale"):
            p.add_argument("--nodes", type=int, default=2)
            p.add_argument("--slices", type=int, default=4, help="nvidia.com/gpu.shared slices per GPU")
            p.add_argument("--timeout", type=float, default=600.0)
        if cmd == "up":
            p.add_argument(
                "--real-node",
                action="store_true",
                help="also a real node (kubelet, containerd), inside the run's namespace; holds until Ctrl-C",
            )
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
