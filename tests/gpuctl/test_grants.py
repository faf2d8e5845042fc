"""gpuctl grants against a live portal: ask for a grant of one GPU type, see it listed, and an
unknown type refused with the portal's message (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

import gpuctl
from gpu.models import Node
from tests.fixtures.personas import PASSWORD, World
from workloads.models import QuotaGrant

pytestmark = pytest.mark.django_db(transaction=True)
RTX = "NVIDIA-GeForce-RTX-5090"


@pytest.fixture
def cli(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_server: Any) -> Any:
    cache.clear()  # the token-creation throttle lives in the shared Redis cache
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "gpuctl.json"))
    monkeypatch.setenv("GPUCTL_PASSWORD", PASSWORD)
    assert gpuctl.main(["login", "--url", live_server.url, "--email", "bob@example.com"]) == 0
    return lambda *argv: gpuctl.main(list(argv))


def test_request_a_typed_grant_then_list_it(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    Node.objects.create(name="n0", gpu_model=RTX)
    capsys.readouterr()
    assert cli("grants", "request", "alpha", "-g", "2", "-t", RTX, "--hours", "48", "--reason", "paper") == 0
    out = capsys.readouterr().out
    assert f"+2 {RTX} GPUs, +0 slices for alpha" in out
    assert "requested (an operator decides)" in out
    grant = QuotaGrant.objects.get()
    assert (grant.gpus, grant.gpu_type, grant.reason) == (2, RTX, "paper")
    assert round((grant.until - grant.starts_at).total_seconds()) == 48 * 3600
    assert cli("grants", "request", "alpha", "-g", "1", "--hours", "1") == 0
    capsys.readouterr()
    assert cli("grants", "--project", "alpha") == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:5] == ["ID", "PROJECT", "GPUS", "GPU_TYPE", "SLICES"]
    assert sorted(r.split()[3] for r in rows[1:]) == [RTX, "any"]


def test_an_unknown_gpu_type_is_refused_with_the_known_ones(
    cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    Node.objects.create(name="n0", gpu_model=RTX)
    assert cli("grants", "request", "alpha", "-g", "2", "-t", "H100", "--hours", "2") == 1
    err = capsys.readouterr().err
    assert "400" in err
    assert f"gpu_type: Unknown GPU type 'H100': the cluster's GPU types are {RTX}." in err
    assert not QuotaGrant.objects.exists()
