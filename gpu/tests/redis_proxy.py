"""A TCP relay in front of the test Redis that a test can cut (connections refused), stall (accepted,
never answered) and restore, to show what the live push does while Redis is away."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlparse


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for end in (source, sink):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


class RedisProxy:
    def __init__(self, redis_url: str) -> None:
        parsed = urlparse(redis_url)
        self.target = (parsed.hostname or "127.0.0.1", parsed.port or 6379)
        self.relaying = True
        self._open: list[socket.socket] = []
        self._server = self._listen(0)
        self.port = self._server.getsockname()[1]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _listen(self, port: int) -> socket.socket:
        server = socket.create_server(("127.0.0.1", port))  # SO_REUSEADDR: the same port again after a cut
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        return server

    def _accept(self, server: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the server closed by cut()
            while True:
                client = server.accept()[0]
                self._open.append(client)
                if not self.relaying:
                    continue  # accepted, never answered
                upstream = socket.create_connection(self.target)
                self._open.append(upstream)
                threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
                threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()

    def _drop_connections(self) -> None:
        for end in self._open:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
        self._open.clear()

    def cut(self) -> None:
        """Redis is gone: open connections drop, new ones are refused."""
        self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread, which a close alone does not
        self._server.close()
        self._drop_connections()

    def stall(self) -> None:
        """Redis hangs: open connections drop, new ones are accepted and never answered."""
        self.relaying = False
        self._drop_connections()

    def restore(self) -> None:
        self._drop_connections()
        self.relaying = True
        if self._server.fileno() == -1:
            self._server = self._listen(self.port)

    def close(self) -> None:
        self.cut()
