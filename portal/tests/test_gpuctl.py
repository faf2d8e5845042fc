"""gpuctl against a live portal: login by password, then read and submit through the real HTTP API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from portal import gpuctl
from tests.fixtures.personas import PASSWORD, World

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_server: Any) -> Any:
    cache.clear()  # the token-creation throttle and login limits live in the shared Redis cache
    monkeypatch.setattr(gpuctl, "CONFIG", tmp_path / "gpuctl.json")
    monkeypatch.setenv("GPUCTL_PASSWORD", PASSWORD)

    def run(*argv: str) -> tuple[int, str]:
        return gpuctl.main(list(argv)), ""

    run.url = live_server.url  # type: ignore[attr-defined]
    return run


def test_login_then_whoami_and_projects(world: World, cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("login", "--url", cli.url, "--email", "bob@example.com")[0] == 0
    assert gpuctl.CONFIG.stat().st_mode & 0o777 == 0o600
    assert cli("whoami")[0] == 0
    assert cli("projects")[0] == 0
    assert cli("quota", "alpha")[0] == 0
    out = capsys.readouterr().out
    assert "bob@example.com" in out
    assert "alpha" in out
    assert "beta" not in out
    assert "gpus: 8" in out


def test_foreign_project_and_bad_submit_are_clear_errors(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("login", "--url", cli.url, "--email", "bob@example.com")
    assert cli("quota", "beta")[0] == 1
    assert cli("submit", "-p", "alpha", "-i", "docker.io/library/busybox:1", "-g", "-1", "--", "true")[0] == 1
    err = capsys.readouterr().err
    assert "404" in err
    assert "400" in err
    assert "gpus" in err


def test_wrong_password_and_no_login(
    world: World, cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("whoami")[0] == 1
    monkeypatch.setenv("GPUCTL_PASSWORD", "wrong")
    assert cli("login", "--url", cli.url, "--email", "bob@example.com")[0] == 1
    err = capsys.readouterr().err
    assert "Not logged in" in err
    assert "401" in err
