"""gpuctl's connection to the portal: the saved token, the HTTP client, and what an answer means.

Every failure becomes a `CliError` carrying the exit code a script can test (`ExitCode`).
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx


class ExitCode(enum.IntEnum):
    """gpuctl's exit statuses (listed in `gpuctl --help` and the user guide)."""

    OK = 0
    REFUSED = 1  # the portal answered and refused (the message says why): 400, 403, 409, 413, 429
    USAGE = 2  # the command line is wrong (argparse uses 2 as well)
    AUTH = 3  # not logged in, or the token is wrong, expired or revoked (401)
    NOT_FOUND = 4  # no such job, project or template among yours (404)
    SERVER = 5  # the portal cannot be reached, or answered 5xx or something that is not its API
    JOB_FAILED = 6  # `logs -f`: the followed job ended without succeeding
    INTERRUPTED = 130  # Ctrl-C


EPILOG = """exit status:
  0    done
  1    the portal refused the request (the message says why)
  2    wrong usage of gpuctl
  3    not logged in, or the token is wrong, expired or revoked: run `gpuctl login`
  4    no such job, project or template among yours
  5    the portal cannot be reached or answered with a server error
  6    logs -f: the job ended without succeeding (failed, cancelled or lost)
  130  interrupted (Ctrl-C)
Messages go to stderr, prefixed `gpuctl: `; output for scripts goes to stdout."""


class CliError(Exception):
    """A message for the user and the exit code that goes with it."""

    def __init__(self, message: str, code: ExitCode = ExitCode.REFUSED) -> None:
        super().__init__(message)
        self.code = code


def config_path() -> Path:
    # Read each time, so GPUCTL_CONFIG set after import (tests, wrappers) is honoured.
    default = Path.home() / ".config" / "gpuctl" / "config.json"
    return Path(os.environ.get("GPUCTL_CONFIG", default))


def load_config() -> dict[str, str]:
    path = config_path()
    if not path.exists():
        raise CliError(
            "Not logged in: run `gpuctl login --url https://portal.example.org --email you@lab.org`.",
            ExitCode.AUTH,
        )
    data: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    return data


def save_config(data: dict[str, str]) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def client(config: dict[str, str] | None = None) -> httpx.Client:
    config = config or load_config()
    headers = {"Authorization": f"Bearer {config['token']}"} if config.get("token") else {}
    return httpx.Client(base_url=config["url"].rstrip("/"), headers=headers, timeout=30.0)


def code_for(status: int) -> ExitCode:
    if status == 401:
        return ExitCode.AUTH
    if status == 404:
        return ExitCode.NOT_FOUND
    return ExitCode.SERVER if status >= 500 else ExitCode.REFUSED


def check(response: httpx.Response) -> Any:
    """The answer's JSON, or a CliError with the portal's message and the matching exit code."""
    if response.status_code < 400:
        return response.json() if response.content else None
    code = code_for(response.status_code)
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{response.status_code}: {response.text[:500]}", code) from None
    fields = error.get("fields") or {}
    hint = " Run `gpuctl login` again." if code is ExitCode.AUTH else ""
    if not fields:
        raise CliError(f"{response.status_code}: {error.get('message', '')}{hint}", code)
    lines = "".join(f"\n  {name}: {' '.join(map(str, msgs))}" for name, msgs in fields.items())
    raise CliError(f"{response.status_code}: the portal refused the request:{lines}", code)


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
    return "\n".join(line.rstrip() for line in lines)
