"""The run's own network namespace as the demo and `make cluster-up REAL_NODE=1` use it: `exec` runs a
second command inside while `run` holds it, `--forward` lets the host's loopback reach a server in
it, and nothing is left behind. Traffic: host 127.0.0.1 to 127.0.0.1 inside the namespace only."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.cluster.helpers import wait_for
from tests.workloads_e2e.procs import free_port

NAME = "gpuportal-nstest"
NETNS = [sys.executable, "-m", "deploy.localcluster.netns"]


def _get(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/marker.txt", timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return None


def test_a_server_in_the_namespace_is_reached_through_the_forward_and_nothing_stays(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "marker.txt").write_text("from inside")
    serve = ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    holder = subprocess.Popen([*NETNS, "run", "--name", NAME, "--forward", str(port), "--", *serve])
    try:
        assert wait_for(lambda: _get(port), 30, "the forwarded server") == "from inside"
        inside = subprocess.run(
            [*NETNS, "exec", "--name", NAME, "--", "ip", "-brief", "address"], capture_output=True, text=True
        )
        assert inside.returncode == 0, inside.stderr
        assert "10.213.0.2/24" in inside.stdout  # the node's address lives there, not on the host
        host = subprocess.run(["ip", "-brief", "address"], capture_output=True, text=True, check=True)
        assert "10.213.0.2" not in host.stdout
    finally:
        holder.terminate()
        holder.wait(timeout=30)
    assert not Path(f"/run/netns/{NAME}").exists()
    assert _get(port) is None
