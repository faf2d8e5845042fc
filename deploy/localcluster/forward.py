"""A TCP forwarder from the host's loopback into the run's network namespace, so a browser on the
host reaches the demo portal that runs beside the real node (`netns run --forward PORT`).

Sockets keep the network namespace they were made in: the listening socket is made here, on the
host; the connecting thread moves itself into the namespace (setns(2) applies to one thread) and
makes every outgoing socket there. Traffic goes from 127.0.0.1 to 127.0.0.1 inside the namespace only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import socket
import threading
from pathlib import Path

CLONE_NEWNET = 0x40000000


def _enter(netns: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(netns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
    finally:
        os.close(fd)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _connector(netns: Path, port: int, accepted: queue.Queue[socket.socket | None]) -> None:
    _enter(netns)  # this thread only
    while (client := accepted.get()) is not None:
        try:
            inner = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            client.close()
            continue
        inner.settimeout(None)
        for a, b in ((client, inner), (inner, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def start(netns: Path, port: int) -> threading.Event:
    """Forward host 127.0.0.1:port to 127.0.0.1:port in `netns`; set the returned event to stop."""
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(0.5)
    accepted: queue.Queue[socket.socket | None] = queue.Queue()
    stop = threading.Event()
    threading.Thread(target=_connector, args=(netns, port, accepted), daemon=True).start()

    def serve() -> None:
        with listener:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    accepted.put(listener.accept()[0])
        accepted.put(None)

    threading.Thread(target=serve, name=f"forward-{port}", daemon=True).start()
    return stop
