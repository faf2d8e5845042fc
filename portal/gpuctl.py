"""`gpuctl`: the command line over the REST API: login, projects, quota, jobs, submit, logs -f, cancel, usage.

It talks HTTP only (httpx) and keeps its token in ~/.config/gpuctl/config.json (mode 0600).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

CONFIG = Path(os.environ.get("GPUCTL_CONFIG", Path.home() / ".config" / "gpuctl" / "config.json"))


class CliError(Exception):
    """A message for the user; exit code 1."""


def load_config() -> dict[str, str]:
    if not CONFIG.exists():
        raise CliError(
            "Not logged in: run `gpuctl login --url https://portal.example.org --email you@lab.org`."
        )
    data: dict[str, str] = json.loads(CONFIG.read_text(encoding="utf-8"))
    return data


def save_config(data: dict[str, str]) -> None:
    CONFIG.parent.mkdir(parents=True, exist_ok=True)
    CONFIG.touch(mode=0o600, exist_ok=True)
    CONFIG.chmod(0o600)
    CONFIG.write_text(json.dumps(data, indent=2), encoding="utf-8")


def client(config: dict[str, str] | None = None) -> httpx.Client:
    config = config or load_config()
    headers = {"Authorization": f"Bearer {config['token']}"} if config.get("token") else {}
    return httpx.Client(base_url=config["url"].rstrip("/"), headers=headers, timeout=30.0)


def check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            raise CliError(f"{response.status_code}: {response.text[:500]}") from None
        fields = error.get("fields") or {}
        if not fields:
            raise CliError(f"{response.status_code}: {error.get('message', '')}")
        lines = "".join(f"\n  {name}: {' '.join(map(str, msgs))}" for name, msgs in fields.items())
        raise CliError(f"{response.status_code}: the portal refused the request:{lines}")
    return response.json() if response.content else None


def results(http: httpx.Client, url: str, params: dict[str, str]) -> Iterator[dict[str, Any]]:
    """Every row of a paginated list. The `next` link already carries the page and the filters
    (passing params again would replace its query string and fetch page 1 forever)."""
    page = check(http.get(url, params=params))
    yield from page["results"]
    while page.get("next"):
        page = check(http.get(page["next"]))
        yield from page["results"]


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def cmd_login(args: argparse.Namespace) -> str:
    password = os.environ.get("GPUCTL_PASSWORD") or getpass.getpass("Password: ")
    body = {
        "email": args.email,
        "password": password,
        "name": args.token_name,
        "scopes": ["read", "submit"],
        "otp": args.otp or "",
    }
    with httpx.Client(base_url=args.url.rstrip("/"), timeout=30.0) as http:
        created = check(http.post("/api/v1/auth/token/", json=body))
    save_config({"url": args.url, "token": created["secret"]})
    return f"Logged in as {args.email}; token {created['prefix']}… expires {created['expires_at']}."


def cmd_whoami(args: argparse.Namespace) -> str:
    with client() as http:
        me = check(http.get("/api/v1/me/"))
    return f"{me['email']}{' (operator)' if me['is_staff'] else ''}"


def cmd_projects(args: argparse.Namespace) -> str:
    with client() as http:
        rows = list(results(http, "/api/v1/projects/", {}))
    for row in rows:
        row["gpus"] = row["quota"]["gpus"]
        row["slices"] = row["quota"]["mps_slices"]
    return table(rows, ["slug", "name", "my_role", "gpus", "slices", "namespace"])


def cmd_quota(args: argparse.Namespace) -> str:
    with client() as http:
        project = check(http.get(f"/api/v1/projects/{args.project}/"))
    return "\n".join(f"{name}: {value}" for name, value in project["quota"].items())


def cmd_jobs(args: argparse.Namespace) -> str:
    params = {k: v for k, v in (("project", args.project), ("state", args.state)) if v}
    with client() as http:
        rows = list(results(http, "/api/v1/jobs/", params))
    for row in rows:
        row["reason"] = row.get("state_reason", "")
    return table(rows, ["id", "project", "name", "state", "gpus", "mps_slices", "node", "reason"])


def submit_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "project": args.project,
        "image": args.image,
        "gpus": args.gpus,
        "mps_slices": args.slices,
        "priority": args.priority,
        "max_runtime_minutes": args.max_runtime,
        "preemptible": args.preemptible,
    }
    if args.name:
        body["name"] = args.name
    if args.gpu_type:
        body["gpu_type"] = args.gpu_type
    if args.command:
        body["command"] = args.command
    if args.env:
        body["env"] = [dict(zip(("name", "value"), item.split("=", 1), strict=True)) for item in args.env]
    return body


def cmd_submit(args: argparse.Namespace) -> str:
    if any("=" not in item for item in args.env or []):
        raise CliError("--env takes NAME=value.")
    with client() as http:
        job = check(http.post("/api/v1/jobs/", json=submit_body(args)))
    return f"submitted {job['id']} ({job['state']})"


def cmd_logs(args: argparse.Namespace) -> str:
    params = {"follow": "1"} if args.follow else {}
    with (
        client() as http,
        http.stream("GET", f"/api/v1/jobs/{args.job}/logs/", params=params, timeout=None) as response,
    ):
        if response.status_code >= 400:
            response.read()
            check(response)
        for chunk in response.iter_text():
            sys.stdout.write(chunk)
            sys.stdout.flush()
    return ""


def cmd_cancel(args: argparse.Namespace) -> str:
    with client() as http:
        job = check(http.post(f"/api/v1/jobs/{args.job}/cancel/"))
    return f"{job['id']}: {job['state']}"


def cmd_usage(args: argparse.Namespace) -> str:
    params = {"project": args.project} if args.project else {}
    with client() as http:
        response = http.get("/api/v1/jobs/accounting/", params=params)
        if response.status_code >= 400:
            check(response)
    return response.text


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuctl", description="GPU portal from the command line.")
    sub = p.add_subparsers(dest="command_name", required=True)
    login = sub.add_parser("login", help="get a token with your email and password")
    login.add_argument("--url", required=True)
    login.add_argument("--email", required=True)
    login.add_argument("--otp", help="current TOTP code, if your account has two-factor authentication")
    login.add_argument("--token-name", default="gpuctl")
    login.set_defaults(run=cmd_login)
    sub.add_parser("whoami").set_defaults(run=cmd_whoami)
    sub.add_parser("projects").set_defaults(run=cmd_projects)
    quota = sub.add_parser("quota")
    quota.add_argument("project")
    quota.set_defaults(run=cmd_quota)
    jobs = sub.add_parser("jobs")
    jobs.add_argument("--project")
    jobs.add_argument(
        "--state",
        help="queued, admitted, running, unknown (no trace in the cluster yet, GPUs still held), "
        "succeeded, failed, cancelled, preempted or lost (no trace for too long, GPUs given back)",
    )
    jobs.set_defaults(run=cmd_jobs)
    add_submit(sub)
    for name, run in (("logs", cmd_logs), ("cancel", cmd_cancel)):
        cmd = sub.add_parser(name)
        cmd.add_argument("job")
        if name == "logs":
            cmd.add_argument("-f", "--follow", action="store_true")
        cmd.set_defaults(run=run)
    usage = sub.add_parser("usage", help="GPU-hours as CSV")
    usage.add_argument("--project")
    usage.set_defaults(run=cmd_usage)
    return p


def add_submit(sub: Any) -> None:
    submit = sub.add_parser(
        "submit", help="submit a job: gpuctl submit -p lab -i registry/repo:tag -g 1 -- cmd args"
    )
    submit.add_argument("-p", "--project", required=True)
    submit.add_argument("-i", "--image", required=True)
    submit.add_argument("-n", "--name")
    submit.add_argument("-g", "--gpus", type=int, default=0)
    submit.add_argument("--slices", type=int, default=0, help="MPS slices instead of whole GPUs")
    submit.add_argument("--gpu-type")
    submit.add_argument("--priority", choices=["low", "normal", "high"], default="normal")
    submit.add_argument("--max-runtime", type=int, default=60, help="minutes")
    submit.add_argument("--preemptible", action="store_true")
    submit.add_argument("-e", "--env", action="append", help="NAME=value (repeatable)")
    submit.add_argument("command", nargs=argparse.REMAINDER)
    submit.set_defaults(run=cmd_submit)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "command", None) and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    run: Callable[[argparse.Namespace], str] = args.run
    try:
        output = run(args)
    except CliError as exc:
        sys.stderr.write(f"gpuctl: {exc}\n")
        return 1
    except httpx.HTTPError as exc:
        sys.stderr.write(f"gpuctl: cannot reach the portal: {exc}\n")
        return 1
    if output:
        sys.stdout.write(output + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
