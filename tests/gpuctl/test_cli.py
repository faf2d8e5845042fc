"""gpuctl against a live portal: login by password, then read and submit through the real HTTP API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

import gpuctl
from tests.fixtures.personas import PASSWORD, World

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_server: Any) -> Any:
    cache.clear()  # the token-creation throttle and login limits live in the shared Redis cache
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "gpuctl.json"))
    monkeypatch.setenv("GPUCTL_PASSWORD", PASSWORD)

    def run(*argv: str) -> tuple[int, str]:
        return gpuctl.main(list(argv)), ""

    run.url = live_server.url  # type: ignore[attr-defined]
    return run


def test_login_then_whoami_and_projects(world: World, cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("login", "--url", cli.url, "--email", "bob@example.com")[0] == 0
    assert gpuctl.config_path().stat().st_mode & 0o777 == 0o600
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
    assert cli("quota", "beta")[0] == 4
    assert cli("submit", "-p", "alpha", "-i", "docker.io/library/busybox:1", "-g", "-1", "--", "true")[0] == 1
    err = capsys.readouterr().err
    assert "404" in err
    assert "400" in err
    assert "gpus" in err


def test_wrong_password_and_no_login(
    world: World, cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("whoami")[0] == 3
    monkeypatch.setenv("GPUCTL_PASSWORD", "wrong")
    assert cli("login", "--url", cli.url, "--email", "bob@example.com")[0] == 3
    err = capsys.readouterr().err
    assert "Not logged in" in err
    assert "401" in err


def _jobs(world: World, count: int, **fields: Any) -> None:
    from workloads.models import Job

    Job.objects.bulk_create(
        Job(project=world.alpha, owner=world.member, image="registry.example.com/team/train:1", **fields)
        for _ in range(count)
    )


def test_jobs_walks_every_page_keeps_the_filters_and_shows_the_reason(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    explanation = {"code": "quota", "sentence": "project quota 8/8 GPUs in use"}
    _jobs(world, 120, state="queued", state_reason="submitted", queue_explanation=explanation)
    _jobs(world, 3, state="failed", state_reason="exit code 3")
    cli("login", "--url", cli.url, "--email", "bob@example.com")
    capsys.readouterr()
    assert cli("jobs", "--project", "alpha", "--state", "queued")[0] == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 120  # three pages of 50, the filter kept on every page
    assert all("waiting: project quota 8/8 GPUs in use" in row for row in rows)
    assert cli("jobs", "--project", "alpha", "--state", "failed")[0] == 0
    assert all("exit code 3" in row for row in capsys.readouterr().out.splitlines()[1:])


def test_usage_honours_the_project_and_a_field_error_is_printed_once(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from accounts.choices import Role
    from accounts.models import Membership
    from workloads.models import Job

    Membership.objects.create(project=world.beta, user=world.member, role=Role.MEMBER)
    started = timezone.now() - timedelta(hours=1)
    _jobs(world, 1, state="succeeded", gpus=1, started_at=started, finished_at=timezone.now())
    Job.objects.create(
        project=world.beta, owner=world.member, image="x/y:1", state="running", gpus=2, started_at=started
    )
    cli("login", "--url", cli.url, "--email", "bob@example.com")
    capsys.readouterr()
    assert cli("usage", "--project", "beta")[0] == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2  # the header and beta's one job
    assert ",beta," in lines[1]
    assert cli("submit", "-p", "alpha", "-i", "docker.io/library/busybox:1", "-g", "-1", "--", "true")[0] == 1
    assert capsys.readouterr().err.count("gpus") == 1


def test_the_cli_starts_without_importing_celery() -> None:
    import subprocess
    import sys

    probe = "import sys, gpuctl; print(sorted(m for m in sys.modules if m.split('.')[0] == 'celery'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
