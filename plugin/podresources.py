"""Client of the kubelet PodResources API v1 (List): which pod/container holds which device ids."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from plugin._proto import podresources_pb2 as pr
from plugin._proto import podresources_pb2_grpc as pr_grpc
from plugin.devices import parse_device_id

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: frozenset[str]


def list_holders(socket: Path, *, timeout_s: float = 2.0) -> list[Holder]:
    """One Holder per container and resource, whatever the number of entries the kubelet sent.

    The upstream kubelet sends one ContainerDevices entry per device (each with its own NUMA
    topology), so the ids of a 2-slice container arrive in two entries. Raises grpc.RpcError when
    the kubelet cannot be asked; callers treat that as 'unknown'."""
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        resp = pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=timeout_s)
    ids: dict[tuple[str, str, str, str], set[str]] = {}
    for pod in resp.pod_resources:
        for c in pod.containers:
            for d in c.devices:
                if d.device_ids:
                    ids.setdefault((pod.namespace, pod.name, c.name, d.resource_name), set()).update(
                        d.device_ids
                    )
    return [Holder(*key, frozenset(found)) for key, found in ids.items()]


def busy_gpus(holders: list[Holder], resources: tuple[str, ...]) -> set[str]:
    """GPU UUIDs that any container holds through one of our resources (whole or slice)."""
    out = set()
    for h in holders:
        if h.resource in resources:
            for dev in h.device_ids:
                try:
                    out.add(parse_device_id(dev)[0])
                except ValueError:
                    continue
    return out
