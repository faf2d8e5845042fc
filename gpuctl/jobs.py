"""gpuctl's job commands: jobs (and --watch), logs (-f), cancel, usage."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from gpuctl.http import CliError, ExitCode, check, client, results, table

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "lost"})  # a preempted job is queued again
NOT_STARTED = frozenset({"queued", "admitted", "preempted"})
STATES_HELP = (
    "queued, admitted, running, unknown (no trace in the cluster yet, GPUs still held), "
    "succeeded, failed, cancelled, preempted or lost (no trace for too long, GPUs given back)"
)
JOB_COLUMNS = ["id", "project", "name", "state", "gpus", "mps_slices", "node", "reason"]


def interval(text: str) -> float:
    """A polling interval, bounded so a typo cannot hammer the portal or wait for a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("seconds, a number from 1 to 300") from None
    if not 1 <= value <= 300:
        raise argparse.ArgumentTypeError("seconds, a number from 1 to 300")
    return value


def job_rows(http: httpx.Client, args: argparse.Namespace) -> list[dict[str, Any]]:
    params = {k: v for k, v in (("project", args.project), ("state", args.state)) if v}
    rows = list(results(http, "/api/v1/jobs/", params))
    for row in rows:
        row["reason"] = row.get("reason") or row.get("state_reason", "")
    return rows


def cmd_jobs(args: argparse.Namespace) -> str:
    with client() as http:
        if not args.watch:
            return table(job_rows(http, args), JOB_COLUMNS)
        while True:
            rows = job_rows(http, args)
            _print_frame(table(rows, JOB_COLUMNS))
            if all(row["state"] in TERMINAL for row in rows):
                return ""
            time.sleep(args.interval)


def _print_frame(text: str) -> None:
    """One refresh of --watch: the screen redrawn on a terminal, a stamped block in a pipe."""
    if sys.stdout.isatty():
        sys.stdout.write("\x1b[H\x1b[2J")
    else:
        sys.stdout.write(f"# {datetime.now(UTC).isoformat(timespec='seconds')}\n")
    sys.stdout.write(text + "\n\n")
    sys.stdout.flush()


def add_jobs(sub: Any) -> None:
    jobs = sub.add_parser("jobs", help="list your jobs (every page), optionally watching them")
    jobs.add_argument("--project")
    jobs.add_argument("--state", help=STATES_HELP)
    jobs.add_argument(
        "-w", "--watch", action="store_true", help="re-print until interrupted or every listed job ended"
    )
    jobs.add_argument("--interval", type=interval, default=5.0, help="seconds between refreshes (1-300)")
    jobs.set_defaults(run=cmd_jobs)


def _wait_for_start(http: httpx.Client, job_id: str, every: float) -> dict[str, Any]:
    """Poll until the job has a pod or ended (the stream of a job not started would be empty)."""
    told = False
    while True:
        job: dict[str, Any] = check(http.get(f"/api/v1/jobs/{job_id}/"))
        if job["state"] not in NOT_STARTED:
            return job
        if not told:
            sys.stderr.write(f"gpuctl: waiting for the job to start: it is {job['state']}\n")
            told = True
        time.sleep(every)


def _stream(http: httpx.Client, job_id: str, follow: bool, worker: int | None) -> None:
    params = {"follow": "1"} if follow else {}
    if worker is not None:
        params["worker"] = str(worker)
    with http.stream("GET", f"/api/v1/jobs/{job_id}/logs/", params=params, timeout=None) as response:
        if response.status_code >= 400:
            response.read()
            check(response)
        for chunk in response.iter_text():
            sys.stdout.write(chunk)
            sys.stdout.flush()


def cmd_logs(args: argparse.Namespace) -> str:
    with client() as http:
        if not args.follow:
            _stream(http, args.job, follow=False, worker=args.worker)
            return ""
        job = _follow(http, args)
    if job["state"] in TERMINAL and job["state"] != "succeeded":
        code = f", exit code {job['exit_code']}" if job.get("exit_code") is not None else ""
        raise CliError(f"job {job['id']} {job['state']}{code}: {job['state_reason']}", ExitCode.JOB_FAILED)
    return ""


def _follow(http: httpx.Client, args: argparse.Namespace) -> dict[str, Any]:
    """Follow the job through its runs: a preempted job is queued again and its next pod followed.
    Returns the job as it was when the stream ended for good (ended, or silent past the idle bound)."""
    while True:
        _wait_for_start(http, args.job, args.interval)
        _stream(http, args.job, follow=True, worker=args.worker)
        job: dict[str, Any] = check(http.get(f"/api/v1/jobs/{args.job}/"))
        if job["state"] not in NOT_STARTED:
            return job
        sys.stderr.write(
            f"gpuctl: the job is {job['state']} again ({job['state_reason']}); following its next run\n"
        )


def cmd_cancel(args: argparse.Namespace) -> str:
    with client() as http:
        job = check(http.post(f"/api/v1/jobs/{args.job}/cancel/"))
    return f"{job['id']}: {job['state']}"


def cmd_usage(args: argparse.Namespace) -> str:
    project = {"project": args.project} if args.project else {}
    with client() as http:
        if args.daily:
            params = {"group": args.group or "project", "days": str(args.days), **project}
            return table(list(results(http, "/api/v1/usage/", params)), ["day", "key", "gpu_hours"])
        state = {"state": args.state} if args.state else {}
        params = {"group": args.group or "job", **project, **state}
        response = http.get("/api/v1/jobs/accounting/", params=params)
        if response.status_code >= 400:
            check(response)
    return response.text.rstrip("\r\n")


def add_job_actions(sub: Any) -> None:
    logs = sub.add_parser("logs", help="print a job's log; -f follows it to the end")
    logs.add_argument("job")
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="wait for the job to start, follow it, exit with its outcome",
    )
    logs.add_argument("--interval", type=interval, default=3.0, help="seconds between checks while it waits")
    logs.add_argument(
        "-w",
        "--worker",
        type=int,
        help="a job of several workers: this worker's log (default: a failed worker's, else worker 0's)",
    )
    logs.set_defaults(run=cmd_logs)
    cancel = sub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job")
    cancel.set_defaults(run=cmd_cancel)
    usage = sub.add_parser("usage", help="GPU-hours: per job as CSV, or per day (--daily)")
    usage.add_argument("--project")
    usage.add_argument("--state", help="only jobs in this state (CSV)")
    usage.add_argument("--group", help="job, user or project (CSV); user or project (--daily)", default=None)
    usage.add_argument("--daily", action="store_true", help="GPU-hours per day as a table")
    usage.add_argument("--days", type=int, default=30, help="with --daily: how many days back (1-366)")
    usage.set_defaults(run=cmd_usage)
