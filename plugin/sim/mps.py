"""A simulated MPS control daemon and its control client, for nodes without a GPU (demo, tests).

It keeps the rules of `nvidia-cuda-mps-control` that the plugin relies on:
- one server per UID: a client of another UID waits until the running server's clients are gone;
- the per-server limits (`set_default_*` for servers started later, `set_*` for a running one) are
  the ceiling: a client's own CUDA_MPS_* variables can only lower its share, and a client that
  clears them gets the server's limit.
The daemon listens on `<CUDA_MPS_PIPE_DIRECTORY>/control.sock`. `python -m plugin.sim.mps control`
reads commands on stdin and prints the answers, as the real control program does; a simulated client
(`connect`) keeps its connection open for as long as it "runs".
"""

from __future__ import annotations

import itertools
import os
import socket
import socketserver
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SOCKET_NAME = "control.sock"
FULL = 100


@dataclass
class _Server:
    pid: int
    uid: int
    thread_pct: int
    mem_mib: int | None
    clients: set[int] = field(default_factory=set)


class SimControl:
    """The daemon's state: the defaults, and the servers with their clients. Thread-safe."""

    def __init__(self) -> None:
        self.default_pct = FULL
        self.default_mem: int | None = None
        self.servers: dict[int, _Server] = {}
        self._ids = itertools.count(40_000)
        self._lock = threading.Lock()

    def command(self, line: str) -> str:
        words = line.split()
        with self._lock:
            return self._command(words[0], words[1:]) if words else ""

    def _command(self, verb: str, args: list[str]) -> str:
        if verb == "set_default_active_thread_percentage":
            self.default_pct = _pct(args[0])
        elif verb == "get_default_active_thread_percentage":
            return f"{float(self.default_pct)}"
        elif verb == "set_default_device_pinned_mem_limit":
            self.default_mem = _mib(args[1])
        elif verb == "get_server_list":
            return "\n".join(str(pid) for pid in sorted(self.servers))
        elif verb == "set_active_thread_percentage":
            self._server(args[0]).thread_pct = _pct(args[1])
        elif verb == "set_device_pinned_mem_limit":
            self._server(args[0]).mem_mib = _mib(args[2])
        else:
            return f"unknown command {verb}"
        return ""

    def _server(self, pid: str) -> _Server:
        return self.servers[int(pid)]

    def connect(self, uid: int, env_pct: int | None, env_mem: int | None) -> tuple[int, str]:
        """A client asks for a server. ("WAIT", ...) while a server of another UID runs."""
        with self._lock:
            busy = [s for s in self.servers.values() if s.uid != uid]
            if busy:
                return 0, f"WAIT server {busy[0].pid} of uid {busy[0].uid} is running"
            server = next((s for s in self.servers.values() if s.uid == uid), None)
            if server is None:
                server = _Server(next(self._ids), uid, self.default_pct, self.default_mem)
                self.servers[server.pid] = server
            client = next(self._ids)
            server.clients.add(client)
            pct = min(server.thread_pct, env_pct) if env_pct is not None else server.thread_pct
            mem = _lower(server.mem_mib, env_mem)
            return client, f"OK server={server.pid} uid={uid} thread_pct={pct} mem_mib={mem or 'none'}"

    def disconnect(self, client: int) -> None:
        with self._lock:
            for pid, server in list(self.servers.items()):
                server.clients.discard(client)
                if not server.clients:
                    del self.servers[pid]  # the real server exits when its last client is done


def _pct(text: str) -> int:
    value = int(float(text))
    if not 1 <= value <= FULL:
        raise ValueError(f"percentage {text} not in 1..100")
    return value


def _mib(text: str) -> int:
    return int(text.rstrip("Mm"))


def _lower(limit: int | None, asked: int | None) -> int | None:
    if limit is None:
        return asked
    return limit if asked is None else min(limit, asked)


def _env_int(env: dict[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    return int(raw.split(",")[0].split("=")[-1].rstrip("Mm"))  # "<uuid>=<n>M,..." or "<n>"


class _Handler(socketserver.StreamRequestHandler):
    server: _Daemon

    def handle(self) -> None:
        first = self.rfile.readline().decode().strip()
        control = self.server.control
        if not first.startswith("connect "):
            self.wfile.write((control.command(first) + "\n.\n").encode())
            return
        env = dict(kv.split("=", 1) for kv in first.split()[1:] if "=" in kv)
        client, answer = control.connect(
            int(env["uid"]),
            _env_int(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
            _env_int(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
        )
        self.wfile.write((answer + "\n").encode())
        self.wfile.flush()
        if client:
            self.rfile.read()  # runs until the client hangs up
            control.disconnect(client)


class _Daemon(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path) -> None:
        self.control = SimControl()
        super().__init__(str(path), _Handler)


def _send(pipe: Path, line: str, end: bytes) -> tuple[socket.socket, str]:
    """One line to the daemon, and its answer up to `end` (or until it hangs up)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(pipe / SOCKET_NAME))
    sock.sendall((line + "\n").encode())
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return sock, data.decode()


def _ask(pipe: Path, line: str) -> str:
    sock, answer = _send(pipe, line, b".\n")
    sock.close()
    return answer.removesuffix(".\n").rstrip("\n")


def connect_client(pipe: Path, uid: int, env: dict[str, str]) -> tuple[socket.socket, str]:
    """What a CUDA program does at start-up under MPS: ask the daemon in `pipe` for a server, with
    its UID and whatever CUDA_MPS_* variables its environment still has. Close the socket to end."""
    fields = [f"uid={uid}"] + [
        f"{k}={v}" for k, v in env.items() if k.startswith("CUDA_MPS_") and " " not in v
    ]
    sock, answer = _send(pipe, "connect " + " ".join(fields), b"\n")
    return sock, answer.strip()


def serve(pipe: Path) -> None:
    pipe.mkdir(parents=True, exist_ok=True)
    path = pipe / SOCKET_NAME
    path.unlink(missing_ok=True)
    _Daemon(path).serve_forever()


def control_main(pipe: Path) -> int:
    for line in sys.stdin:
        if line.strip():
            answer = _ask(pipe, line.strip())
            if answer:
                print(answer, flush=True)
    return 0


def main(argv: list[str]) -> int:
    pipe = Path(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
    if argv[:1] == ["control"]:
        return control_main(pipe)
    serve(pipe)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
