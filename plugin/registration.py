"""Registering with the kubelet, and noticing when it restarts.

The kubelet re-creates `kubelet.sock` when it restarts and wipes every plugin socket; it then knows
nothing about us until we register again. There is no inotify in the stdlib, so `KubeletSocketWatch`
polls the socket's (inode, ctime) every ~0.25 s, which is cheap and catches a re-creation well inside
the 5 s budget.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from plugin._proto import deviceplugin_pb2 as pb
from plugin._proto import deviceplugin_pb2_grpc as pb_grpc

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
DEFAULT_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")


def register(
    kubelet_socket: Path,
    *,
    endpoint: str,
    resource: str,
    options: pb.DevicePluginOptions,
    timeout_s: float = 5.0,
) -> None:
    """One Register call; raises grpc.RpcError when the kubelet is not (yet) there or refuses us."""
    with grpc.insecure_channel(f"unix://{kubelet_socket}") as channel:
        pb_grpc.RegistrationStub(channel).Register(
            pb.RegisterRequest(
                version=API_VERSION, endpoint=endpoint, resource_name=resource, options=options
            ),
            timeout=timeout_s,
        )


def self_dial(socket: Path, timeout_s: float = 5.0) -> None:
    """Make sure our own server answers before telling the kubelet about it (upstream does the same)."""
    # A real RPC rather than channel_ready_future: the latter polls connectivity and costs ~200 ms.
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        pb_grpc.DevicePluginStub(channel).GetDevicePluginOptions(pb.Empty(), timeout=timeout_s)


class KubeletSocketWatch:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None

    def identity(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_ctime_ns

    def changed(self) -> tuple[bool, bool]:
        """(present, new): `new` is True once per (re-)creation of the socket."""
        ident = self.identity()
        new = ident is not None and ident != self._seen
        self._seen = ident
        return ident is not None, new
