"""Pure builder and reader of a project volume's PersistentVolumeClaim. Tested by dict equality.

Only typed, validated fields of the `ProjectVolume` row are copied in; the claim carries the
portal's labels, so the reconcile can tell a claim it made from one an operator made by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from plugin.names import MANAGER
from workloads.k8s.labels import MANAGED_BY, PROJECT_LABEL, object_meta
from workloads.models import ProjectVolume

JSON = dict[str, Any]
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_UNITS.update({f"{u}i": 1024**n for n, u in enumerate(("K", "M", "G", "T", "P", "E"), start=1)})
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


def build_claim(volume: ProjectVolume, namespace: str) -> JSON:
    """The claim a portal-made volume asks for: class, one access mode, size in GiB."""
    meta = object_meta(volume.claim_name, namespace, **{PROJECT_LABEL: volume.project.slug})
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": {
            "storageClassName": volume.storage_class,
            "accessModes": [volume.access_mode],
            "resources": {"requests": {"storage": f"{volume.size_gib}Gi"}},
        },
    }


def quantity_bytes(value: object) -> int | None:
    """A storage quantity ("100Gi", "5G", "1073741824") in bytes; None when it is not one of those."""
    match = _QUANTITY.match(str(value or ""))
    if match is None:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2) or ""])


def requested_bytes(claim: JSON) -> int | None:
    return quantity_bytes(
        ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
    )


def made_by_portal(claim: JSON) -> bool:
    return ((claim.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGER


@dataclass(frozen=True)
class ClaimStatus:
    """What the portal shows an operator about a volume's claim: Kubernetes' phase, or one of the
    portal's own (Missing, Conflict, Error), and a sentence."""

    phase: str
    message: str = ""


def claim_status(claim: JSON) -> ClaimStatus:
    status = claim.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    capacity = (status.get("capacity") or {}).get("storage")
    return ClaimStatus(phase, f"capacity {capacity}" if capacity else "")


def api_message(text: str) -> str:
    """The sentence of a Kubernetes Status body (the whole text when it is not one)."""
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text[:300]
    return str(body.get("message") if isinstance(body, dict) and body.get("message") else text)[:300]
