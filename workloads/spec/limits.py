"""What one job may ask for beyond the declaration: the project's images, volumes and quota, and the
site's own caps and switches."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from workloads.spec.fields import SPEC_FIELDS, SpecField


@dataclass(frozen=True)
class SpecLimits:
    """What the project (and the site) allow one job to ask for."""

    images: frozenset[tuple[str, str]]
    volumes: Mapping[str, bool]  # volume name -> read-only enforced
    maxima: Mapping[str, int]  # field name -> the most one job may ask for (the quota and the site)
    totals: Mapping[str, int] = dataclasses.field(
        default_factory=dict
    )  # field name -> the quota, for all workers
    simulation: bool = False
    real_node: bool = False  # the "real-node" placement may be asked for (tests, demo)


def site_maximum(field: SpecField) -> int | None:
    """The most any job may ask for on this site: the declared bound, or the site's setting if lower."""
    own = field.hints.site_maximum
    if own is None or field.highest is None:
        return field.highest
    return min(field.highest, own())


def quota_maxima(quota: object) -> dict[str, int]:
    """Field name -> the most one job of a project with this quota (accounts.models.Quota) may ask for;
    a field with a site cap and no quota of its name (workers) gets the site's cap."""
    maxima = {}
    for field in SPEC_FIELDS:
        site = site_maximum(field)
        if field.hints.quota:
            own = int(getattr(quota, field.name))
            maxima[field.name] = own if site is None else min(own, site)
        elif field.hints.site_maximum is not None and site is not None:
            maxima[field.name] = site
    return maxima


def quota_totals(quota: object) -> dict[str, int]:
    """Field name -> the project's quota of that name: what all the workers of one job may ask for
    together (each worker asks for the field's value)."""
    return {f.name: int(getattr(quota, f.name)) for f in SPEC_FIELDS if f.hints.quota}
