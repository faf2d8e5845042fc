"""gpuctl's job paths against a live portal: submit with every spec flag, templates, jobs --watch,
logs -f into running and to the job's outcome, cancel, and the exit codes a script relies on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection

import gpuctl
from tests.fixtures.personas import PASSWORD, World
from workloads.models import Job, JobTemplate
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_server: Any) -> Any:
    cache.clear()  # the token-creation throttle lives in the shared Redis cache
    allow_images(world.alpha)  # the image rule and a volume "data"
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "gpuctl.json"))
    monkeypatch.setenv("GPUCTL_PASSWORD", PASSWORD)
    assert gpuctl.main(["login", "--url", live_server.url, "--email", "bob@example.com"]) == 0
    return lambda *argv: gpuctl.main(list(argv))


def later(seconds: float, change: Callable[[], object]) -> threading.Thread:
    """Change the database from another thread while the CLI polls (as the controller would)."""

    def run() -> None:
        time.sleep(seconds)
        try:
            change()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_submit_sends_every_spec_flag(world: World, cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli(
        "submit",
        "-p",
        "alpha",
        "-i",
        IMAGE,
        "-n",
        "full",
        "--workers",
        "2",
        "-g",
        "1",
        "--gpu-type",
        "NVIDIA-H200",
        "--cpu",
        "2",
        "--memory",
        "8Gi",
        "-v",
        "data:/data:ro",
        "-e",
        "A=1",
        "-e",
        "B=x=y",
        "--arg=--epochs",
        "--arg",
        "3",
        "--priority",
        "high",
        "--max-runtime",
        "30",
        "--preemptible",
        "--",
        "python",
        "train.py",
    )
    assert rc == 0, capsys.readouterr().err
    job = Job.objects.get()
    assert f"submitted {job.uid} (queued)" in capsys.readouterr().out
    assert (job.name, job.workers, job.gpus, job.gpu_type, job.cpu_millicores, job.memory_mib) == (
        "full",
        2,
        1,
        "NVIDIA-H200",
        2000,
        8192,
    )
    assert job.volumes == [{"volume": "data", "mount_path": "/data", "read_only": True}]
    assert job.env == [{"name": "A", "value": "1"}, {"name": "B", "value": "x=y"}]
    assert (job.args, job.command) == (["--epochs", "3"], ["python", "train.py"])
    assert (job.priority, job.max_runtime_minutes, job.preemptible) == ("high", 30, True)


def test_quota_lists_the_allowed_images_and_volumes(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli("quota", "alpha") == 0
    out = capsys.readouterr().out
    assert "gpus: 8" in out
    assert "images: registry.example.com/team/train" in out
    assert "volumes: data" in out


def test_slices_and_cpu_in_millicores(world: World, cli: Any) -> None:
    world.alpha.quota.mps_slices = 4
    world.alpha.quota.save()
    assert cli("submit", "-p", "alpha", "-i", IMAGE, "--slices", "2", "--cpu", "500m", "--memory", "512") == 0
    job = Job.objects.get()
    assert (job.mps_slices, job.gpus, job.cpu_millicores, job.memory_mib) == (2, 0, 500, 512)


def test_templates_save_list_submit_with_overrides_and_delete(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("submit", "-p", "alpha", "-i", IMAGE, "-g", "1", "-e", "SEED=7", "--", "python", "t.py") == 0
    first = Job.objects.get()
    assert cli("templates", "save", str(first.uid), "--name", "seeded", "--description", "seed 7") == 0
    assert cli("templates") == 0
    listing = capsys.readouterr().out
    assert "seeded" in listing
    assert "seed 7" in listing
    assert cli("submit", "--template", "seeded", "-g", "2", "-n", "bigger") == 0
    second = Job.objects.exclude(pk=first.pk).get()
    assert (second.gpus, second.name, second.command, second.env) == (2, "bigger", first.command, first.env)
    assert cli("submit", "--template", "nothing") == 4
    assert "No template named 'nothing'" in capsys.readouterr().err
    assert cli("templates", "delete", "seeded", "-p", "alpha") == 0
    assert not JobTemplate.objects.exists()


def test_jobs_watch_reprints_until_every_job_ended(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("submit", "-p", "alpha", "-i", IMAGE) == 0
    job = Job.objects.get()
    capsys.readouterr()
    done = later(1.5, lambda: Job.objects.filter(pk=job.pk).update(state="succeeded"))
    assert cli("jobs", "--watch", "--interval", "1") == 0
    done.join()
    frames = capsys.readouterr().out.split("# ")[1:]  # each refresh starts with a time stamp in a pipe
    assert len(frames) >= 2
    assert "queued" in frames[0]
    assert "succeeded" in frames[-1]
    assert cli("jobs", "--watch", "--interval", "0.1") == 2  # bounded: 1 to 300 seconds


def test_logs_follow_waits_for_a_queued_job_and_exits_with_its_outcome(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("submit", "-p", "alpha", "-i", IMAGE) == 0
    job = Job.objects.get()
    capsys.readouterr()

    def finish() -> None:
        Job.objects.filter(pk=job.pk).update(
            state="succeeded", exit_code=0, log_tail="hello\n\nworld\n", log_captured=True
        )

    later(1.5, finish)
    assert cli("logs", "-f", str(job.uid), "--interval", "1") == 0
    captured = capsys.readouterr()
    assert "waiting for the job to start: it is queued" in captured.err
    assert captured.out == "hello\n\nworld\n"
    Job.objects.filter(pk=job.pk).update(state="failed", exit_code=3, state_reason="exit code 3")
    assert cli("logs", "-f", str(job.uid)) == 6
    assert f"job {job.uid} failed, exit code 3" in capsys.readouterr().err
    assert cli("logs", str(job.uid)) == 0  # without -f: the log, whatever the outcome


def test_cancel_then_cancel_again_and_an_unknown_job(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("submit", "-p", "alpha", "-i", IMAGE) == 0
    job = Job.objects.get()
    assert cli("cancel", str(job.uid)) == 0
    assert f"{job.uid}: cancelled" in capsys.readouterr().out
    assert cli("cancel", str(job.uid)) == 1  # refused: it has ended
    assert "400" in capsys.readouterr().err
    assert cli("cancel", "00000000-0000-0000-0000-000000000000") == 4
    assert cli("logs", "-f", "00000000-0000-0000-0000-000000000000") == 4


def test_exit_codes_for_usage_auth_and_an_unreachable_portal(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli() == 2
    assert cli("submit", "-i", IMAGE) == 2  # no project, no template
    assert cli("submit", "-p", "alpha", "-i", IMAGE, "-v", "data") == 2
    assert cli("submit", "-p", "alpha", "-i", IMAGE, "-e", "NOEQUALS") == 2
    assert cli("--help") == 0
    assert "3    not logged in" in capsys.readouterr().out
    world.member.api_tokens.update(revoked_at=world.member.date_joined)
    assert cli("whoami") == 3
    assert "gpuctl login" in capsys.readouterr().err
    gpuctl.config_path().write_text('{"url": "http://127.0.0.1:9", "token": "x"}', encoding="utf-8")
    assert cli("jobs") == 5
    assert "cannot reach the portal" in capsys.readouterr().err


def test_usage_daily_reads_every_page_of_the_usage_list(
    world: World, cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    start = timezone.now() - timedelta(days=59)  # 60 UTC days: more than one page of 50
    Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image=IMAGE,
        state="succeeded",
        gpus=1,
        started_at=start,
        finished_at=timezone.now(),
    )
    capsys.readouterr()
    assert cli("usage", "--daily", "--days", "90") == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split() == ["DAY", "KEY", "GPU_HOURS"]
    assert len(rows) == 61
    assert all(" alpha " in row for row in rows[1:])
    assert cli("usage", "--daily", "--days", "999") == 1
    assert "days" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["templates", "-p", "alpha", "list"],
        ["templates", "list", "-p", "alpha"],
        ["templates", "-p", "alpha"],
    ],
)
def test_the_templates_project_filter_is_kept_wherever_it_is_given(argv: list[str]) -> None:
    assert gpuctl.parser().parse_args(argv).project == "alpha"


def test_ctrl_c_during_watch_exits_130(world: World, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuctl import jobs

    assert cli("submit", "-p", "alpha", "-i", IMAGE) == 0  # a queued job: --watch would go on

    def interrupt(text: str) -> None:  # the user presses Ctrl-C while the first frame is shown
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "_print_frame", interrupt)
    assert cli("jobs", "--watch") == 130
