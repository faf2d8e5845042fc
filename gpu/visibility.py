"""Who may see what of a GPU frame (pure functions, used by consumers, pages and the API).

Operators see everything. A user sees full detail only for GPUs that run a process of one of
their projects' namespaces, and then only their own processes; every other GPU is reduced to
busy/free, health and sharing mode, so a map never leaks another tenant's pods or load.
"""

from __future__ import annotations

from typing import Any

from gpu.messages import GpuFrame, NodeFrame

# What a non-operator is told a held node is held for (the job and its project are another tenant's).
HELD_FOR_OTHERS = "a waiting job of several workers"
PUBLIC_KEYS = ("uuid", "node", "index", "ts", "health", "sharing_mode", "in_service")


def is_mine(frame: GpuFrame, namespaces: frozenset[str]) -> bool:
    return any(p["pod_namespace"] in namespaces for p in frame["processes"])


def redact(frame: GpuFrame, namespaces: frozenset[str] | None) -> dict[str, Any]:
    """`namespaces` None means an operator; otherwise the viewer's project namespaces."""
    if namespaces is None:
        return dict(frame)
    if is_mine(frame, namespaces):
        own = [p for p in frame["processes"] if p["pod_namespace"] in namespaces]
        return {**frame, "processes": own, "others": len(frame["processes"]) - len(own), "mine": True}
    out: dict[str, Any] = {key: frame[key] for key in PUBLIC_KEYS}  # type: ignore[literal-required]
    out.update(busy=bool(frame["processes"]), redacted=True, mine=False)
    return out


def redact_all(gpus: dict[str, GpuFrame], namespaces: frozenset[str] | None) -> dict[str, dict[str, Any]]:
    return {uuid: redact(frame, namespaces) for uuid, frame in gpus.items()}


def redact_node(frame: NodeFrame, namespaces: frozenset[str] | None) -> NodeFrame:
    """A node's state as the viewer may see it: only operators see which job a held node is for."""
    if namespaces is None or not frame["held_for"]:
        return frame
    return {**frame, "held_for": HELD_FOR_OTHERS}
