"""`make demo`'s portal as a newcomer meets it: `manage.py demo` in a process of its own on the
embedded defaults (SQLite, no Redis), with its own local cluster. Signed in with the password it
prints, the researcher's pages answer, the demo jobs are admitted and reach Running in kwok, and the
simulated agents' telemetry is stored. The rest of the suite runs on Postgres, so this is where SQL
or settings that only work there would show."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import requests

from deploy.localcluster import stop_cluster
from deploy.localcluster.paths import run_dir
from tests.workloads_e2e.procs import REPO, embedded_env, free_port

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]
CLUSTER = "gpuportal-demo-test"  # not the developer's own `make demo` cluster, which it would replace
SIGN_IN = re.compile(r"sign in as researcher@example\.com / (\S+)")
T = TypeVar("T")


class Demo:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path, db: Path, url: str) -> None:
        self.proc, self.log, self.db, self.url = proc, log, db, url

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, what: str, found: Callable[[], T | None], seconds: float) -> T:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (
                f"the demo exited ({self.proc.returncode}):\n{self.output()[-3000:]}"
            )
            if (value := found()) is not None:
                return value
            time.sleep(1.0)
        raise AssertionError(f"no {what} within {seconds:.0f} s:\n{self.output()[-3000:]}")

    def count(self, sql: str) -> int | None:
        """A count from the demo's own database, read-only; None until it has one above zero."""
        try:
            with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5) as conn:
                n = int(conn.execute(sql).fetchone()[0])
        except sqlite3.OperationalError:  # not migrated yet
            return None
        return n or None


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    env = embedded_env(tmp_path)  # as make demo runs it
    port = free_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--port", str(port), "--cluster-name", CLUSTER],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield Demo(proc, log, tmp_path / "portal.sqlite3", f"http://127.0.0.1:{port}")
    finally:
        proc.send_signal(signal.SIGTERM)  # ends it like Ctrl-C: the demo deletes its cluster itself
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        stop_cluster(CLUSTER, run_dir())  # in case it could not


def _answers(url: str) -> int | None:
    try:
        return requests.get(url, timeout=5).status_code
    except requests.ConnectionError:
        return None


def _signed_in(base: str, password: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/accounts/login/", timeout=10).raise_for_status()
    answer = session.post(
        f"{base}/accounts/login/",
        data={
            "login": "researcher@example.com",
            "password": password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/accounts/login/"},
        timeout=10,
    )
    assert answer.ok, answer.status_code
    assert "/accounts/login/" not in answer.url, "the printed password did not sign in"
    return session


def test_the_demo_signs_in_runs_its_jobs_and_stores_telemetry(demo: Demo) -> None:
    password = demo.wait("sign-in line", lambda: (m := SIGN_IN.search(demo.output())) and m.group(1), 240)
    assert demo.wait("web server", lambda: _answers(f"{demo.url}/accounts/login/"), 60) == 200
    session = _signed_in(demo.url, password)
    for page in ("/", "/jobs/", "/cluster/"):
        answer = session.get(f"{demo.url}{page}", timeout=30)
        assert answer.status_code == 200, (page, answer.status_code)
    running = demo.wait(
        "job Running in kwok",
        lambda: demo.count("SELECT count(*) FROM workloads_job WHERE state = 'running'"),
        180,
    )
    assert running >= 1
    jobs = session.get(f"{demo.url}/api/v1/jobs/?state=running", timeout=30).json()
    assert jobs["count"] >= 1, jobs
    assert jobs["results"][0]["project"] == "vision-lab"
    assert demo.wait("stored telemetry", lambda: demo.count("SELECT count(*) FROM gpu_sample"), 120) > 0
    assert demo.count("SELECT count(*) FROM gpu_gpu WHERE last_seen IS NOT NULL")  # ingest's bookkeeping
    # A clean log: no deprecation or other warning from the demo's processes.
    assert not re.findall(r"\w*Warning\b.*", demo.output()), re.findall(r"\w*Warning\b.*", demo.output())
