"""gpuctl submit (every field of the job spec has a flag; --template NAME with flags as overrides)
and gpuctl templates (list, save a job as one, delete).

Only the flags given go into the request: the portal fills in its defaults, and with a template
the flags override exactly the fields they name.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import httpx

from gpuctl.http import CliError, ExitCode, check, client, results, table

MEMORY_UNITS = {"": 1, "mi": 1, "gi": 1024, "ti": 1024 * 1024}


def cpu(text: str) -> int:
    """CPU as Kubernetes writes it: cores (`2`, `0.5`) or millicores (`500m`), to millicores."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m?)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: cores such as 2 or 0.5, or millicores such as 500m")
    number, milli = match.groups()
    return round(float(number)) if milli else round(float(number) * 1000)


def memory(text: str) -> int:
    """Memory in MiB: `4096`, `512Mi`, `8Gi`, `1Ti`."""
    match = re.fullmatch(r"(\d+)([MGT]i)?", text.strip(), flags=re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: MiB such as 4096, or 512Mi, 8Gi, 1Ti")
    number, unit = match.groups()
    return int(number) * MEMORY_UNITS[(unit or "").lower()]


def env(text: str) -> dict[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=value")
    return {"name": name, "value": value}


def volume(text: str) -> dict[str, Any]:
    """NAME:/mount/path[:ro|:rw], a project volume by name."""
    parts = text.split(":")
    mode = parts.pop() if len(parts) == 3 else "rw"
    if len(parts) != 2 or not parts[0] or not parts[1].startswith("/") or mode not in ("ro", "rw"):
        raise argparse.ArgumentTypeError(f"{text!r}: NAME:/mount/path, or NAME:/mount/path:ro")
    return {"volume": parts[0], "mount_path": parts[1], "read_only": mode == "ro"}


# (flag, spec field, argparse options): one line per field of the job spec.
SPEC_FLAGS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("-n", "--name"), "name", {}),
    (("-i", "--image"), "image", {"help": "registry/repository:tag from the project's allow-list"}),
    (
        ("-w", "--workers"),
        "workers",
        {
            "type": int,
            "metavar": "N",
            "help": "pods that run together, each with the GPUs, CPU and memory given",
        },
    ),
    (("-g", "--gpus"), "gpus", {"type": int, "metavar": "N", "help": "whole GPUs on one node (per worker)"}),
    (
        ("--slices", "--mps-slices"),
        "mps_slices",
        {"type": int, "metavar": "N", "help": "MPS slices instead of whole GPUs"},
    ),
    (
        ("--gpu-type",),
        "gpu_type",
        {"metavar": "PRODUCT", "help": "a GPU product, e.g. NVIDIA-GeForce-RTX-5090"},
    ),
    (
        ("--cpu",),
        "cpu_millicores",
        {"type": cpu, "metavar": "CPU", "help": "cores (2, 0.5) or millicores (500m)"},
    ),
    (("--memory",), "memory_mib", {"type": memory, "metavar": "SIZE", "help": "MiB, or 512Mi, 8Gi"}),
    (("--priority",), "priority", {"choices": ["low", "normal", "high"]}),
    (("--max-runtime",), "max_runtime_minutes", {"type": int, "metavar": "MINUTES", "help": "minutes"}),
    (("--preemptible",), "preemptible", {"action": argparse.BooleanOptionalAction}),
    (
        ("--interactive",),
        "interactive",
        {"action": argparse.BooleanOptionalAction, "help": "a notebook or shell: the longer idle window"},
    ),
    (
        ("-e", "--env"),
        "env",
        {"type": env, "metavar": "NAME=VALUE", "action": "append", "help": "NAME=value (repeatable)"},
    ),
    (
        ("-v", "--volume"),
        "volumes",
        {
            "type": volume,
            "action": "append",
            "metavar": "NAME:/PATH[:ro]",
            "help": "NAME:/mount/path[:ro], a project volume (repeatable)",
        },
    ),
    (
        ("--arg",),
        "args",
        {"action": "append", "metavar": "ARG", "help": "an argument to the image's entrypoint (repeatable)"},
    ),
]


def spec_body(args: argparse.Namespace) -> dict[str, Any]:
    """The spec fields the user gave, and only those."""
    body = {field: getattr(args, field) for _, field, _ in SPEC_FLAGS if getattr(args, field) is not None}
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command:
        body["command"] = command
    return body


def find_template(http: httpx.Client, name: str, project: str | None) -> dict[str, Any]:
    params = {"name": name, **({"project": project} if project else {})}
    found = list(results(http, "/api/v1/templates/", params))
    where = f" in project {project}" if project else " in your projects"
    if not found:
        raise CliError(
            f"No template named {name!r}{where}; `gpuctl templates` lists them.", ExitCode.NOT_FOUND
        )
    if len(found) > 1:
        projects = ", ".join(sorted(t["project"] for t in found))
        raise CliError(f"Templates named {name!r} are in several projects ({projects}); add -p PROJECT.")
    return found[0]


def cmd_submit(args: argparse.Namespace) -> str:
    body = spec_body(args)
    with client() as http:
        if args.template:
            template = find_template(http, args.template, args.project)
            job = check(http.post(f"/api/v1/templates/{template['id']}/submit/", json=body))
        else:
            if not args.project or "image" not in body:
                raise CliError("submit needs -p PROJECT and -i IMAGE (or --template NAME).", ExitCode.USAGE)
            job = check(http.post("/api/v1/jobs/", json={"project": args.project, **body}))
    return f"submitted {job['id']} ({job['state']})"


def add_submit(sub: Any) -> None:
    submit = sub.add_parser(
        "submit",
        help="submit a job: gpuctl submit -p lab -i registry/repo:tag -g 1 -- cmd args",
        description="Submit a job. Only the flags given are sent; with --template they override "
        "the template's fields. After --, the command (replaces the image's entrypoint).",
    )
    submit.add_argument("-p", "--project", help="required unless --template names a template of one project")
    submit.add_argument("-t", "--template", help="start from this template of the project (by name)")
    for flags, field, options in SPEC_FLAGS:
        submit.add_argument(*flags, dest=field, default=None, **options)
    submit.add_argument("command", nargs=argparse.REMAINDER)
    submit.set_defaults(run=cmd_submit)


TEMPLATE_COLUMNS = ["id", "project", "name", "image", "gpus", "mps_slices", "description"]


def cmd_templates(args: argparse.Namespace) -> str:
    with client() as http:
        rows = list(results(http, "/api/v1/templates/", {"project": args.project} if args.project else {}))
    for row in rows:
        row.update(image=row["spec"].get("image"), gpus=row["spec"].get("gpus", 0))
        row["mps_slices"] = row["spec"].get("mps_slices", 0)
    return table(rows, TEMPLATE_COLUMNS)


def cmd_template_save(args: argparse.Namespace) -> str:
    body = {"name": args.name, "description": args.description or ""}
    with client() as http:
        template = check(http.post(f"/api/v1/jobs/{args.job}/template/", json=body))
    return f"saved template {template['name']!r} ({template['id']}) in {template['project']}"


def cmd_template_delete(args: argparse.Namespace) -> str:
    with client() as http:
        template = find_template(http, args.name, args.project)
        check(http.delete(f"/api/v1/templates/{template['id']}/"))
    return f"deleted template {template['name']!r} of {template['project']}"


def add_templates(sub: Any) -> None:
    templates = sub.add_parser("templates", help="list job templates; save a job as one; delete one")
    templates.add_argument("-p", "--project")
    templates.set_defaults(run=cmd_templates)
    actions = templates.add_subparsers(dest="template_action")
    listing = actions.add_parser("list", help="the templates of your projects")
    listing.add_argument("-p", "--project", default=argparse.SUPPRESS)  # keep `templates -p X list`
    listing.set_defaults(run=cmd_templates)
    save = actions.add_parser("save", help="save a job's request as a template of its project")
    save.add_argument("job")
    save.add_argument("--name", required=True)
    save.add_argument("--description")
    save.set_defaults(run=cmd_template_save)
    delete = actions.add_parser("delete", help="delete a template by name")
    delete.add_argument("name")
    delete.add_argument("-p", "--project", default=argparse.SUPPRESS)
    delete.set_defaults(run=cmd_template_delete)
