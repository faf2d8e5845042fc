"""gpuctl grants: list the temporary quota grants of your projects, or ask for one (`grants request`),
optionally of one GPU type. Operators approve or refuse requests in the admin."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuctl.http import check, client, results, table

GRANT_COLUMNS = ["id", "project", "gpus", "gpu_type", "slices", "starts_at", "until", "status", "reason"]


def hours(text: str) -> float:
    """A grant's length in hours: more than 0, at most 31 days (the portal's limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("hours, a number from 0.1 to 744") from None
    if not 0.1 <= value <= 744:
        raise argparse.ArgumentTypeError("hours, a number from 0.1 to 744")
    return value


def moment(text: str) -> datetime:
    """An ISO 8601 date and time; UTC when it has no offset."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: ISO 8601, such as 2026-12-07T09:00+01:00") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def cmd_grants(args: argparse.Namespace) -> str:
    with client() as http:
        rows = list(results(http, "/api/v1/grants/", {}))  # the grants of all my projects
    if args.project:
        rows = [r for r in rows if r.get("project") == args.project]
    for row in rows:
        row["gpu_type"] = row.get("gpu_type") or "any"
    return table(rows, GRANT_COLUMNS)


def request_body(args: argparse.Namespace) -> dict[str, Any]:
    starts: datetime = args.starts or datetime.now(UTC)
    body: dict[str, Any] = {
        "project": args.project,
        "gpus": args.gpus,
        "slices": args.slices,
        "until": (starts + timedelta(hours=args.hours)).isoformat(),
        "reason": args.reason,
    }
    if args.starts:
        body["starts_at"] = starts.isoformat()
    if args.gpu_type:
        body["gpu_type"] = args.gpu_type
    return body


def cmd_grant_request(args: argparse.Namespace) -> str:
    with client() as http:
        grant = check(http.post("/api/v1/grants/", json=request_body(args)))
    kind = f" {grant['gpu_type']}" if grant.get("gpu_type") else ""
    return (
        f"grant {grant['id']}: +{grant['gpus']}{kind} GPUs, +{grant['slices']} slices for {grant['project']} "
        f"from {grant['starts_at']} until {grant['until']}: {grant['status']} (an operator decides)"
    )


def add_grants(sub: Any) -> None:
    grants = sub.add_parser("grants", help="temporary quota grants of your projects; `grants request` asks")
    grants.add_argument("--project")
    grants.set_defaults(run=cmd_grants)
    actions = grants.add_subparsers(dest="grant_action")
    ask = actions.add_parser("request", help="ask for a temporary quota grant (an operator decides)")
    ask.add_argument("project")
    ask.add_argument("-g", "--gpus", type=int, default=0, metavar="N", help="whole GPUs")
    ask.add_argument("--slices", type=int, default=0, metavar="N", help="MPS slices")
    ask.add_argument(
        "-t",
        "--gpu-type",
        default="",
        help="a GPU product of the cluster: also raises the project's limit for that type (default: any)",
    )
    ask.add_argument("--hours", type=hours, required=True, help="how long it lasts (at most 744 = 31 days)")
    ask.add_argument("--starts", type=moment, help="ISO 8601 start (default: now; UTC without an offset)")
    ask.add_argument("--reason", default="")
    ask.set_defaults(run=cmd_grant_request)
