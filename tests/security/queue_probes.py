"""Cross-tenant probes for the admission queue's routes: /api/v1/grants/ and /api/v1/usage/.

The victim gets a grant (reason "victim-grant") and a started 1-GPU job, so a leak of either
would show in a list as the victim's project slug, email or marker.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from workloads.models import Job, QuotaGrant
from workloads.tests.conftest import IMAGE, allow_images


def _victim_setup(victim: Any) -> None:
    now = timezone.now()
    QuotaGrant.objects.create(
        project=victim.project,
        requested_by=victim.manager,
        gpus=2,
        until=now + timedelta(days=1),
        reason="victim-grant",
    )
    if not victim.project.image_rules.exists():
        allow_images(victim.project)
    Job.objects.create(
        project=victim.project,
        owner=victim.manager,
        image=IMAGE,
        gpus=1,
        name="victim-usage",
        state="running",
        started_at=now - timedelta(hours=2),
    )
    victim.extra.setdefault("markers", []).append("victim-grant")


def register_queue_probes() -> None:
    from tests.security.probes import PROBES, VICTIM_SETUP, Probe

    until = (timezone.now() + timedelta(days=1)).isoformat()
    PROBES.update(
        {
            "GET /api/v1/grants/": lambda v: [Probe("GET", "/api/v1/grants/", "no_foreign_rows")],
            "POST /api/v1/grants/": lambda v: [
                Probe(
                    "POST",
                    "/api/v1/grants/",
                    "denied",
                    {"project": v.project.slug, "gpus": 2, "until": until},
                )
            ],
            "GET /api/v1/usage/": lambda v: [
                Probe("GET", "/api/v1/usage/?group=project", "no_foreign_rows"),
                Probe("GET", "/api/v1/usage/?group=user", "no_foreign_rows"),
                Probe("GET", f"/api/v1/usage/?project={v.project.slug}&group=user", "no_foreign_rows"),
                Probe("GET", "/api/v1/usage/?group=project&export=csv", "no_foreign_rows"),
                Probe("GET", "/api/v1/usage/?group=user&export=csv", "no_foreign_rows"),
            ],
        }
    )
    if _victim_setup not in VICTIM_SETUP:
        VICTIM_SETUP.append(_victim_setup)
