"""gpuctl's command line: the parser, the account commands, and `main` with its exit statuses."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable

import httpx

from gpuctl.grants import add_grants
from gpuctl.http import EPILOG, CliError, ExitCode, check, client, results, save_config, table
from gpuctl.jobs import add_job_actions, add_jobs
from gpuctl.submit import add_submit, add_templates


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
        response = http.post("/api/v1/auth/token/", json=body)
        if response.status_code in (400, 401):  # a wrong password or code: the login itself failed
            try:
                check(response)
            except CliError as exc:
                raise CliError(str(exc), ExitCode.AUTH) from None
        created = check(response)
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
        quota = row.get("quota") or {}
        row["gpus"], row["slices"] = quota.get("gpus", 0), quota.get("mps_slices", 0)
    return table(rows, ["slug", "name", "my_role", "gpus", "slices", "namespace"])


def cmd_quota(args: argparse.Namespace) -> str:
    """The quota, then what a job may use: images (any tag of each) and volumes by name."""
    with client() as http:
        project = check(http.get(f"/api/v1/projects/{args.project}/"))
        allowed = check(http.get(f"/api/v1/projects/{args.project}/allowed/"))
    lines = [f"{name}: {value}" for name, value in (project["quota"] or {}).items()]
    lines.append("images: " + (", ".join(allowed["images"]) or "none yet (ask an operator)"))
    volumes = [f"{v['name']}{' (read-only)' if v['read_only'] else ''}" for v in allowed["volumes"]]
    lines.append("volumes: " + (", ".join(volumes) or "none"))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuctl",
        description="GPU portal from the command line.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command_name", required=True)
    login = sub.add_parser("login", help="get a token with your email and password")
    login.add_argument("--url", required=True)
    login.add_argument("--email", required=True)
    login.add_argument("--otp", help="current TOTP code, if your account has two-factor authentication")
    login.add_argument("--token-name", default="gpuctl")
    login.set_defaults(run=cmd_login)
    sub.add_parser("whoami", help="who the saved token belongs to").set_defaults(run=cmd_whoami)
    sub.add_parser("projects", help="your projects and their GPU quota").set_defaults(run=cmd_projects)
    quota = sub.add_parser("quota", help="one project's quota, allowed images and volumes")
    quota.add_argument("project")
    quota.set_defaults(run=cmd_quota)
    add_jobs(sub)
    add_submit(sub)
    add_templates(sub)
    add_job_actions(sub)
    add_grants(sub)
    return p


def _parse(argv: list[str] | None) -> argparse.Namespace | int:
    try:
        return parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage or the help
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if isinstance(args, int):
        return args
    run: Callable[[argparse.Namespace], str] = args.run
    try:
        output = run(args)
    except CliError as exc:
        sys.stderr.write(f"gpuctl: {exc}\n")
        return int(exc.code)
    except httpx.HTTPError as exc:
        sys.stderr.write(f"gpuctl: cannot reach the portal: {exc}\n")
        return int(ExitCode.SERVER)
    except KeyboardInterrupt:
        sys.stderr.write("gpuctl: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    if output:
        sys.stdout.write(output + "\n")
    return int(ExitCode.OK)
