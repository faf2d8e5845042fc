"""Every file the code and the docs name exists: a path written in a comment, a docstring or a guide
(`gpu/broadcast.py`, `docs/reliability.md`) and every relative Markdown link."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = ("portal", "gpu", "accounts", "workloads", "plugin", "deploy", "tests", "bench", "docs", "gpuctl")
APPS = ("portal", "gpu", "accounts", "workloads")
PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/[\w./*-]*[\w*])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
TEXT = (".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".cfg", "Makefile")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    this = Path(__file__).resolve()  # its examples of missing files are meant
    return [ROOT / name for name in out.split() if name.endswith(TEXT) and ROOT / name != this]


def _resolves(ref: str, where: Path) -> bool:
    """At the repository's root, beside the file that names it, or (a template or a static file named
    by its app-relative path) in an app's templates/ or static/."""
    places = [ROOT / ref, where.parent / ref]
    places += [ROOT / app / kind / ref for app in APPS for kind in ("templates", "static")]
    if "*" in ref:  # a pattern (as git matches it, across folders) names at least one file
        return any(next(place.parent.rglob(place.name), None) for place in places)
    return any(place.exists() for place in places)


def unresolved(files: list[Path]) -> list[str]:
    missing = []
    for path in files:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            refs = [m.group(1).rstrip(".") for m in PATH.finditer(line)]
            if "kubectl" in line:  # deploy/<name> there is a Deployment, not a folder
                refs = [ref for ref in refs if not ref.startswith("deploy/")]
            if path.suffix == ".md":
                refs += [m.group(1) for m in LINK.finditer(line) if "://" not in m.group(1)]
            missing += [
                f"{path.relative_to(ROOT)}:{number}: {ref}" for ref in refs if not _resolves(ref, path)
            ]
    return missing


def test_every_file_the_code_and_the_docs_name_exists() -> None:
    assert unresolved(_tracked()) == []


def test_a_missing_file_is_reported_with_where_it_is_named(tmp_path: Path) -> None:
    guide = ROOT / "docs" / "reference-check-probe.md"
    guide.write_text(
        "See `gpu/no_such_module.py`, `gpu/tests/test_*.py`, `gpu/tests/nothing_*.py`,"
        " [the guide](user-guide.md) and [gone](gone.md).\n"
    )
    try:
        assert unresolved([guide]) == [
            "docs/reference-check-probe.md:1: gpu/no_such_module.py",
            "docs/reference-check-probe.md:1: gpu/tests/nothing_*.py",
            "docs/reference-check-probe.md:1: gone.md",
        ]
    finally:
        guide.unlink()
