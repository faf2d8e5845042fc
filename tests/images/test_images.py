"""The portal and node images (`make images`), checked as built: run with crun, read from the layout.

The portal serves /healthz under uvicorn and passes `check --deploy` with production settings; the node
image's two programs start; both run as uid 10001, carry the git revision and hold no compiler.
"""

from __future__ import annotations

import json
import re
import secrets
import select
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.images import oci

REPO = Path(__file__).resolve().parents[2]
# Production settings (portal/settings/): nothing listens on these ports, and nothing needs to for
# `check --deploy` or /healthz; /readyz would answer 503.
PRODUCTION_ENV = {
    "GPUPORTAL_PRODUCTION": "1",
    "SECRET_KEY": secrets.token_urlsafe(48),
    "ALLOWED_HOSTS": "portal.example.org",
    "REDIS_URL": "redis://127.0.0.1:1/0",
    "DATABASE_URL": "postgres://x:y@127.0.0.1:1/x",
    "TRUST_X_FORWARDED_PROTO": "1",  # the chart's TLS proxy; lets the static check ask over plain HTTP
}
COMPILER = re.compile(
    r"^((x86_64-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|cpp|c89|c99|clang|clang\+\+|tcc|ld|as)(-[\d.]+)?"
    r"|x86_64-linux-gnu-(gcc|g\+\+|cpp)(-[\d.]+)?)$"
)
COMPILER_PACKAGES = re.compile(r"^(gcc|g\+\+|cpp|clang|binutils|tcc|libc6-dev|build-essential)(-[\d.]+)?$")
BIN_DIRS = ("usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin", "opt/gpu-portal/venv/bin")


@pytest.fixture(scope="module")
def images() -> dict[str, dict[str, Any]]:
    return oci.built()


@pytest.fixture(scope="module")
def portal(images: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> oci.Bundle:
    return oci.unpack(images["portal"], tmp_path_factory.mktemp("portal"))


@pytest.fixture(scope="module")
def node(images: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> oci.Bundle:
    return oci.unpack(images["node"], tmp_path_factory.mktemp("node"))


@pytest.fixture(params=["portal", "node"])
def image_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310 (a fixed http:// URL)
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
        status: int = response.status
        return status, response.read()


@pytest.fixture(scope="module")
def uvicorn(portal: oci.Bundle) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The chart's web command, in the container, on a loopback port of the host's network."""
    port = _free_port()
    args = ["python", "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    argv = oci.prepare(portal, args, PRODUCTION_ENV, port_on_host=True)
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(base + "/healthz", server)
        yield base, server
    finally:
        oci.stop(argv[-1])
        server.wait(timeout=30)


def _wait_for(url: str, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            output = server.stdout.read() if server.stdout else ""
            pytest.fail(f"uvicorn in the portal image exited ({server.returncode}):\n{output}", pytrace=False)
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"uvicorn in the portal image did not answer {url} within 60 s", pytrace=False)


def test_portal_answers_healthz_under_uvicorn(uvicorn: tuple[str, subprocess.Popen[str]]) -> None:
    base, _ = uvicorn
    status, body = _get(base + "/healthz")
    assert status == 200
    assert json.loads(body) == {"ok": True}


def test_portal_serves_the_collected_static_files(uvicorn: tuple[str, subprocess.Popen[str]]) -> None:
    base, _ = uvicorn
    headers = {"Host": "portal.example.org", "X-Forwarded-Proto": "https"}
    status, body = _get(base + "/static/vendor/htmx/htmx.min.js", headers)
    assert status == 200
    assert b"htmx" in body


def _post_until_answered(base: str, path: str, head: list[str], chunks: Iterator[bytes]) -> tuple[bytes, int]:
    """POST by hand: the headers, then each chunk while the server has not answered; the answer and
    the body bytes sent before it came."""
    host, port = base.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", "Host: portal.example.org", "X-Forwarded-Proto: https", *head]
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent = 0
        for chunk in chunks:
            if select.select([sock], [], [], 0.05)[0]:
                break
            sock.sendall(chunk)
            sent += len(chunk)
        return _read_answer(sock), sent


def _read_answer(sock: socket.socket) -> bytes:
    """The whole answer: its head, then as many body bytes as its Content-Length says."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        if not chunk:
            return answer
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length and len(body) < int(length.group(1)):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_portal_refuses_a_body_over_the_limit_before_reading_it(
    uvicorn: tuple[str, subprocess.Popen[str]],
) -> None:
    """Under the chart's server, with no ingress in front: 413 as the bytes pass 2.5 MiB, declared or
    not, rather than a file of any size in the pod's /tmp."""
    base, _ = uvicorn
    size = 64 * 1024 * 1024
    # Declared: answered before any of the body is sent (a server that waited for it would time out).
    declared, _ = _post_until_answered(base, "/api/v1/auth/token/", [f"Content-Length: {size}"], iter([]))
    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    # Chunked: 64 MiB offered, refused once 2.5 MiB have come.
    chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
    chunked, before = _post_until_answered(
        base, "/api/v1/auth/token/", ["Transfer-Encoding: chunked"], iter([chunk] * (size // 65536))
    )
    assert chunked.startswith(b"HTTP/1.1 413"), chunked[:200]
    assert b"larger than 2621440 bytes" in chunked
    assert before < 8 * 1024 * 1024


def test_portal_passes_check_deploy_with_production_settings(portal: oci.Bundle) -> None:
    result = oci.run(
        portal, ["python", "manage.py", "check", "--deploy", "--fail-level", "WARNING"], PRODUCTION_ENV
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize(
    "args",
    [["celery", "-A", "portal", "report"], ["python", "manage.py", "controller", "--help"]],
    ids=["celery-app", "controller"],
)
def test_portal_chart_commands_load_the_app(portal: oci.Bundle, args: list[str]) -> None:
    result = oci.run(portal, args, PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("module", ["plugin", "plugin.agent"])
def test_node_programs_start(node: oci.Bundle, module: str) -> None:
    result = oci.run(node, ["python", "-m", module, "--help"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "usage:" in result.stdout


def test_node_image_holds_no_django(node: oci.Bundle) -> None:
    site = node.rootfs / "opt/gpu-portal/venv/lib/python3.11/site-packages"
    assert (site / "grpc").is_dir()
    assert not (site / "django").exists()


def _bundle(name: str, request: pytest.FixtureRequest) -> oci.Bundle:
    bundle: oci.Bundle = request.getfixturevalue(name)
    return bundle


def test_runs_as_uid_10001_by_default(
    image_name: str, images: dict[str, dict[str, Any]], request: pytest.FixtureRequest
) -> None:
    assert oci.image_config(images[image_name])["config"]["User"] == "10001:10001"
    result = oci.run(
        _bundle(image_name, request), ["python", "-c", "import os; print(os.getuid(), os.getgid())"]
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["10001", "10001"]


def test_labels_name_the_git_revision(image_name: str, images: dict[str, dict[str, Any]]) -> None:
    labels = oci.image_config(images[image_name])["config"]["Labels"]
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    assert labels["org.opencontainers.image.revision"].removesuffix("-dirty") == head.stdout.strip()
    assert labels["org.opencontainers.image.title"] == f"gpu-portal-{image_name}"
    version = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert version
    assert labels["org.opencontainers.image.version"] == version.group(1)
    assert labels["org.opencontainers.image.source"].startswith("https://")


def test_archive_holds_the_same_image(image_name: str, images: dict[str, dict[str, Any]]) -> None:
    image = images[image_name]
    raw = subprocess.run(
        ["skopeo", "inspect", "--raw", f"oci-archive:{image['archive']}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(raw.stdout)["config"]["digest"] == oci.manifest(image)["config"]["digest"]


def test_holds_no_compiler(image_name: str, request: pytest.FixtureRequest) -> None:
    rootfs = _bundle(image_name, request).rootfs
    found = [
        f"{d}/{entry.name}"
        for d in BIN_DIRS
        if (rootfs / d).is_dir()
        for entry in (rootfs / d).iterdir()
        if COMPILER.match(entry.name)
    ]
    assert found == []
    status = (rootfs / "var/lib/dpkg/status").read_text()
    packages = re.findall(r"^Package: (\S+)$", status, re.M)
    assert "python3.11" in packages  # the list is the real one
    assert [p for p in packages if COMPILER_PACKAGES.match(p)] == []


def test_every_shared_library_resolves(image_name: str, request: pytest.FixtureRequest) -> None:
    """A wheel's native code may link a system library the slim base lacks (grpcio needs libstdc++)."""
    script = "find /opt/gpu-portal/venv /usr/lib/python3.11 -name '*.so*' -type f -exec ldd {} + 2>&1"
    result = oci.run(_bundle(image_name, request), ["sh", "-c", script])
    missing = sorted({line.strip() for line in result.stdout.splitlines() if "not found" in line})
    assert missing == []
    assert "libc.so.6" in result.stdout  # ldd did run over the libraries
