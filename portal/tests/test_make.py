"""The two commands set up what they need on a fresh clone (checked on the Makefile's plan, `make -n`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _plan(target: str) -> list[str]:
    out = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def test_make_demo_installs_the_front_end_packages_before_serving() -> None:
    plan = _plan("demo")
    serve = next(i for i, line in enumerate(plan) if "manage.py demo" in line)
    assert any("frontend.sh" in line for line in plan[:serve]), plan


def test_make_screenshots_retakes_every_guide_screenshot_into_docs() -> None:
    """Every test that takes a guide's screenshot is one `make screenshots` runs, writing into docs/img/
    (a plain run writes into .run/shots/)."""
    takers = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "docs_shot(" in path.read_text()
    }
    plan = " ".join(_plan("screenshots"))
    assert f"GPUPORTAL_SHOTS_DIR={ROOT}/docs/img" in plan
    assert takers, "no test takes a screenshot"
    assert {taker for taker in takers if taker not in plan} == set()
