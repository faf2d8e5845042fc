"""A TCP proxy that can be cut: the outage drills put it between the portal's processes and
Postgres or the Kubernetes API server, so "down" is a real network outage for those processes
(open connections reset, new ones refused) while the test itself still reads both directly.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.workloads_e2e.procs import free_port


class CuttableProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self._up = threading.Event()
        self._up.set()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True).start()

    def down(self) -> None:
        """Cut every open connection and refuse new ones until `up()`."""
        self._up.clear()
        with self._lock:
            for sock in self._open:
                _cut(sock)
            self._open.clear()

    def up(self) -> None:
        self._up.set()

    def close(self) -> None:
        self._closed = True
        self.down()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if not self._up.is_set():  # cut while this one was connecting
                    _cut(client)
                    _cut(upstream)
                    continue
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                _cut(sock)
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)


def _cut(sock: socket.socket) -> None:
    """Shut the connection down for both ends, then close it. close() alone would leave it open
    while the other pump thread is blocked reading it (the kernel keeps the socket for that call),
    and Postgres would keep the backend, and its locks, of a client long gone."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
