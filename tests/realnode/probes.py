"""Connection tries from real pods, one line of output per try: `name=outcome`.

Two forms: a busybox shell script (test pods and tenant jobs) and a Python program (the portal's
image has Python and no nc). A try completes when the TCP connection is set up; a refused connection
or one that times out counts as refused, as a NetworkPolicy may do either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

LISTEN_PORT = 9999  # a second port opened inside a portal container, which no policy opens

# Forks away from `kubectl exec` (its streams closed, so the exec returns) and accepts on
# LISTEN_PORT for 15 minutes: a port the container does listen on, so a refusal is the policy's.
_LISTENER = f"""
import os, socket, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    sys.exit(0)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
server = socket.create_server(("0.0.0.0", {LISTEN_PORT}))
server.settimeout(1)
end = time.monotonic() + 900
while time.monotonic() < end:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        continue
    conn.close()
"""

_PYTHON_TRIES = """
import json, socket, sys
for name, host, port in json.loads(sys.argv[1]):
    try:
        socket.create_connection((host, port), timeout=3).close()
        print(f"{name}=completed")
    except ConnectionRefusedError:
        print(f"{name}=refused")
    except OSError:
        print(f"{name}=timed-out")
"""


@dataclass(frozen=True)
class Try:
    name: str
    host: str
    port: int


def listener_argv() -> list[str]:
    """For `kubectl exec` into a portal container: leave a listener on LISTEN_PORT running."""
    return ["python", "-c", _LISTENER]


def python_argv(tries: list[Try]) -> list[str]:
    """For `kubectl exec` into a portal container: each try, one line each."""
    return ["python", "-c", _PYTHON_TRIES, json.dumps([[t.name, t.host, t.port] for t in tries])]


def _nc(attempt: Try) -> str:
    # Connected and left open by the other side, nc waits: `timeout` ends it (exit 143), still a
    # completed connection. nc alone gives up connecting after 3 s (exit 1).
    return f"busybox timeout 5 nc -w 3 {attempt.host} {attempt.port} </dev/null >/dev/null 2>&1"


def shell_script(tries: list[Try], *, settle: Try | None = None, lookup: str | None = None) -> str:
    """A busybox script that tries each in turn, printing `name=completed|refused`.

    `settle`: a connection the pod's policy refuses, tried first (up to 60 s) until it is refused: a
    new pod's own rules come with the enforcer's next sync, and until then its traffic passes.
    `lookup`: a name to resolve at the end (`nslookup`'s answer follows)."""
    lines = []
    if settle:
        lines.append(f"i=0; while {_nc(settle)}; do i=$((i+1)); [ $i -ge 60 ] && break; sleep 1; done")
        lines.append('echo "settled after $i s"')
    for attempt in tries:
        lines.append(f"{_nc(attempt)}; rc=$?")
        lines.append(
            f'if [ $rc -eq 0 ] || [ $rc -eq 143 ]; then echo "{attempt.name}=completed"; '
            f'else echo "{attempt.name}=refused"; fi'
        )
    if lookup:
        lines.append(f"echo lookup:; nslookup {lookup}; true")
    return "\n".join(lines)


def outcomes(log: str) -> dict[str, str]:
    """`name -> completed | refused` from either form's output (a timeout counts as refused)."""
    out = {}
    for line in log.splitlines():
        name, sep, outcome = line.strip().partition("=")
        if sep and outcome in ("completed", "refused", "timed-out"):
            out[name] = "completed" if outcome == "completed" else "refused"
    return out
