"""Writes for nodes and GPUs: the mirror of the cluster's Nodes, operators' intent, agent tokens.

The mirror functions take the raw Node JSON (a dict), never a kubernetes object: the watch itself
lives in workloads (workloads/controller/watches.py), the only layer that may talk to the Kubernetes
API. Desired state changes (cordon, sharing mode, service) are saved here and a
`workloads.reconcile_node` task is sent by name after commit, so this layer never imports workloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from celery import current_app
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts import tokens
from accounts.audit import audit_record, snapshot
from accounts.models import User
from gpu import app_settings, broadcast, cordon
from gpu.choices import GpuEventKind, GpuHealth, SharingMode
from gpu.models import Gpu, GpuEvent, Node, NodeToken
from gpu.signals import gpu_failed
from plugin.names import GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, GPU_RESOURCE

NODE_TOKEN_PREFIX = "gpn_"  # noqa: S105 - a public marker, not a secret
# How long a rotated token keeps working beside its replacement: time to roll the agents' Secret.
ROTATION_OVERLAP = timedelta(hours=24)
MAX_SLICES = 48
# The workloads app converges nodes; gpu sends its task by name because gpu never imports workloads.
NODE_TASK = "workloads.reconcile_node"
MIRRORED = (
    "uid",
    "labels",
    "capacity",
    "allocatable",
    "conditions",
    "cordoned",
    "gpu_model",
    "gpu_count",
    "deleted",
    "deleted_at",
)


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    # Heartbeat times change every few seconds; keeping them would turn every heartbeat into a write.
    keep = ("type", "status", "reason", "message", "lastTransitionTime")
    return [{k: c.get(k) for k in keep if k in c} for c in status.get("conditions") or []]


def _gpu_count(status: dict[str, Any], labels: dict[str, str]) -> int:
    value = (status.get("capacity") or {}).get(GPU_RESOURCE) or labels.get(GPU_COUNT_LABEL) or 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def node_fields_from_raw(raw: dict[str, Any]) -> dict[str, Any]:
    """The mirrored fields of a raw Node dict (pure; tested with plain dicts)."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    labels = dict(meta.get("labels") or {})
    return {
        "uid": str(meta.get("uid") or ""),
        "labels": labels,
        "capacity": dict(status.get("capacity") or {}),
        "allocatable": dict(status.get("allocatable") or {}),
        "conditions": _conditions(status),
        "cordoned": bool(spec.get("unschedulable", False)),
        "gpu_model": str(labels.get(GPU_PRODUCT_LABEL, ""))[:120],
        "gpu_count": _gpu_count(status, labels),
        "deleted": False,
        "deleted_at": None,
    }


def node_apply(*, raw: dict[str, Any]) -> Node:
    """Mirror one Node (ADDED/MODIFIED event or list item); writes only when something changed."""
    name = str((raw.get("metadata") or {})["name"])
    fields = node_fields_from_raw(raw)
    node, created = Node.objects.get_or_create(name=name, defaults=fields)
    changed = [key for key in MIRRORED if getattr(node, key) != fields[key]]
    node.resource_version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
    if created or changed:
        for key in changed:
            setattr(node, key, fields[key])
        node.synced_at = timezone.now()
        node.save(update_fields=[*changed, "resource_version", "synced_at"])
        transaction.on_commit(lambda: broadcast.node_changed(node))
    return node


def node_remove(*, name: str) -> Node | None:
    """A DELETED event: keep the row (history, accounting) but mark it gone."""
    node = Node.objects.filter(name=name, deleted=False).first()
    if node is None:
        return None
    node.deleted, node.deleted_at, node.synced_at = True, timezone.now(), timezone.now()
    node.save(update_fields=["deleted", "deleted_at", "synced_at"])
    transaction.on_commit(lambda: broadcast.node_changed(node))
    return node


def node_relist(*, names: list[str]) -> int:
    """After a full list: every node the cluster no longer has is marked deleted. Returns how many."""
    gone = Node.objects.filter(deleted=False).exclude(name__in=names)
    return gone.update(deleted=True, deleted_at=timezone.now(), synced_at=timezone.now())


def node_reconcile_enqueue(*, node: Node) -> None:
    """Ask the workloads layer (by task name: gpu never imports workloads) to converge this node."""
    node_id = node.pk
    transaction.on_commit(lambda: current_app.send_task(NODE_TASK, args=[node_id]))


def node_sweep() -> int:
    """The periodic safety net (a lost enqueue must not lose a cordon): re-send the node task for every
    node whose cordon differs from the operators' intent, and once for the shared sharing ConfigMap.
    Level-triggered and idempotent, so sending too often only costs a GET."""
    live = Node.objects.filter(deleted=False)
    nodes = [node for node in live.exclude(desired_cordoned=None) if node.needs_cordon_change]
    first = live.filter(gpus__isnull=False).order_by("pk").first()
    if first is not None and first not in nodes:
        nodes.append(first)
    for node in nodes:
        node_reconcile_enqueue(node=node)
    return len(nodes)


def node_holds_set(*, holds: Mapping[str, str]) -> int:
    """Mark each node the admission queue holds for a waiting job of several workers with that job
    (node name -> "project/job"), and clear the marks of the others; returns the rows changed."""
    stale = Node.objects.exclude(held_for="").exclude(name__in=list(holds))
    names = set(stale.values_list("name", flat=True))
    Node.objects.filter(name__in=names).update(held_for="")
    for name, text in holds.items():
        if Node.objects.filter(name=name).exclude(held_for=text[:200]).update(held_for=text[:200]):
            names.add(name)
    if names:
        # The cluster map and node pages show the marks live (the cluster group and each node's).
        transaction.on_commit(lambda: _nodes_changed(names))
    return len(names)


def _nodes_changed(names: set[str]) -> None:
    for node in Node.objects.filter(name__in=names):
        broadcast.node_changed(node)


def _actor(actor: User | None) -> User | None:
    return actor if isinstance(actor, User) else None


def node_set_cordon(
    *, node: Node, cordoned: bool, actor: User | None, request: HttpRequest | None = None
) -> Node:
    before = snapshot(node, exclude=("labels", "capacity", "allocatable", "conditions"))
    node.desired_cordoned, node.health_cordoned = cordoned, False  # the operator's word replaces the portal's
    node.save(update_fields=["desired_cordoned", "health_cordoned"])
    audit_record(
        actor=_actor(actor),
        action="node.cordon" if cordoned else "node.uncordon",
        obj=node,
        before=before,
        after={"desired_cordoned": cordoned},
        request=request,
    )
    node_reconcile_enqueue(node=node)
    return node


def gpu_set_sharing(
    *, gpu: Gpu, mode: SharingMode, slices: int, actor: User | None, request: HttpRequest | None = None
) -> Gpu:
    if mode == SharingMode.SHARED and not 1 <= slices <= MAX_SLICES:
        raise ValidationError({"slices": [f"A shared GPU has 1..{MAX_SLICES} slices."]})
    before = {"sharing_mode": gpu.sharing_mode, "slices": gpu.slices}
    gpu.sharing_mode, gpu.slices = mode, slices if mode == SharingMode.SHARED else 1
    gpu.full_clean()
    gpu.save(update_fields=["sharing_mode", "slices"])
    after = {"sharing_mode": gpu.sharing_mode, "slices": gpu.slices}
    GpuEvent.objects.create(gpu=gpu, kind=GpuEventKind.SHARING, message=f"{before} -> {after}"[:300])
    audit_record(
        actor=_actor(actor), action="gpu.sharing", obj=gpu, before=before, after=after, request=request
    )
    node_reconcile_enqueue(node=gpu.node)
    return gpu


def gpu_set_cross_project(
    *, gpu: Gpu, allowed: bool, actor: User | None, request: HttpRequest | None = None
) -> Gpu:
    """Let a shared GPU hold slices of several projects at once (weaker isolation), or not. Jobs
    already placed stay; the next placements follow the new rule (admission and the plugin)."""
    before = {"cross_project": gpu.cross_project}
    gpu.cross_project = allowed
    gpu.save(update_fields=["cross_project"])
    text = "cross-project sharing allowed" if allowed else "one project at a time"
    GpuEvent.objects.create(gpu=gpu, kind=GpuEventKind.SHARING, message=text)
    audit_record(
        actor=_actor(actor),
        action="gpu.cross_project",
        obj=gpu,
        before=before,
        after={"cross_project": allowed},
        request=request,
    )
    node_reconcile_enqueue(node=gpu.node)
    return gpu


def gpu_set_in_service(
    *, gpu: Gpu, in_service: bool, actor: User | None, request: HttpRequest | None = None
) -> Gpu:
    before = {"in_service": gpu.in_service}
    gpu.in_service = in_service
    gpu.save(update_fields=["in_service"])
    GpuEvent.objects.create(
        gpu=gpu, kind=GpuEventKind.SERVICE, message="returned to service" if in_service else "taken out"
    )
    audit_record(
        actor=_actor(actor),
        action="gpu.service",
        obj=gpu,
        before=before,
        after={"in_service": in_service},
        request=request,
    )
    node_health_cordon(node=gpu.node)
    node_reconcile_enqueue(node=gpu.node)
    return gpu


def _announce(node: str, uuid: str, reason: str, pods: list[tuple[str, str]]) -> Callable[[], None]:
    def send() -> None:
        gpu_failed.send(sender=Gpu, node=node, gpu_uuid=uuid, reason=reason, pods=pods)

    return send


def gpu_health_followup(
    *, node: Node, failed: dict[str, str], pods: dict[str, list[tuple[str, str]]], offer_changed: bool
) -> None:
    """After a health change: announce newly failed GPUs (workloads requeues their jobs) and, when a
    GPU's offer changed, re-apply the node's health cordon and run the node task (plugin ConfigMap)."""
    for uuid, reason in failed.items():
        # robust: a failing receiver is logged and never turns the agent's accepted batch into an error
        transaction.on_commit(_announce(node.name, uuid, reason, list(pods.get(uuid, []))), robust=True)
    if offer_changed:
        node_health_cordon(node=node)
        node_reconcile_enqueue(node=node)


def node_health_cordon(*, node: Node) -> Node:
    """Cordon a node whose GPUs are all out; lift the portal's own cordon when one returns."""
    offered = [gpu.offered for gpu in Gpu.objects.filter(node=node)]
    desired, by_health = cordon.cordon_wanted(
        offered=offered, desired=node.desired_cordoned, health_cordoned=node.health_cordoned
    )
    if (desired, by_health) != (node.desired_cordoned, node.health_cordoned):
        before = {"desired_cordoned": node.desired_cordoned, "health_cordoned": node.health_cordoned}
        node.desired_cordoned, node.health_cordoned = desired, by_health
        node.save(update_fields=["desired_cordoned", "health_cordoned"])
        action = "node.health_cordon" if by_health else "node.health_uncordon"
        after = {"desired_cordoned": desired, "health_cordoned": by_health}
        audit_record(actor=None, action=action, obj=node, before=before, after=after)
    return node


def gpu_force_health(
    *, gpu: Gpu, healthy: bool, actor: User | None, request: HttpRequest | None = None, reason: str = ""
) -> Gpu:
    """Operators force either way: healthy now (clears the clean interval), or unhealthy as if a
    critical event had just hit it (its jobs are requeued; it returns by the usual rule)."""
    offered, was = gpu.offered, gpu.health
    why = reason.strip() or ("cleared by an operator" if healthy else "forced by an operator")
    gpu.health = GpuHealth.HEALTHY if healthy else GpuHealth.UNHEALTHY
    gpu.health_reason = "" if healthy else why[:300]
    gpu.last_bad_at = None if healthy else timezone.now()
    gpu.save(update_fields=["health", "health_reason", "last_bad_at"])
    GpuEvent.objects.create(gpu=gpu, kind=GpuEventKind.HEALTH, message=f"{was} -> {gpu.health}: {why}"[:300])
    audit_record(
        actor=_actor(actor),
        action="gpu.health_clear" if healthy else "gpu.health_fault",
        obj=gpu,
        before={"health": was},
        after={"health": gpu.health, "reason": gpu.health_reason},
        request=request,
    )
    failed = {gpu.uuid: gpu.health_reason} if not healthy and was != GpuHealth.UNHEALTHY else {}
    gpu_health_followup(node=gpu.node, failed=failed, pods={}, offer_changed=offered != gpu.offered)
    return gpu


def node_token_digest(secret: str) -> str:
    """What a node token stores in place of its secret."""
    return tokens.digest(secret)


def node_token_create(
    *, node: Node, name: str = "agent", actor: User | None = None, request: HttpRequest | None = None
) -> tuple[NodeToken, str]:
    """Returns the token and its secret; only the digest is stored, the secret is shown once."""
    minted = tokens.mint(NODE_TOKEN_PREFIX)
    expires_at = timezone.now() + timedelta(days=app_settings.node_token_days())
    token = NodeToken(
        node=node,
        name=name.strip() or "agent",
        prefix=minted.prefix,
        digest=minted.digest,
        expires_at=expires_at,
    )
    token.full_clean()
    token.save()
    audit_record(
        actor=_actor(actor),
        action="node_token.create",
        obj=token,
        after=snapshot(token, exclude=("digest",)),
        request=request,
    )
    return token, minted.secret


def node_token_rotate(
    *, token: NodeToken, actor: User | None = None, request: HttpRequest | None = None
) -> tuple[NodeToken, str]:
    """A new token for the same node and name; the old one keeps working for ROTATION_OVERLAP (never
    longer than it would have), so the agent's secret can be replaced without a gap."""
    with transaction.atomic():
        new, secret = node_token_create(node=token.node, name=token.name, actor=actor, request=request)
        ends = min(token.expires_at, timezone.now() + ROTATION_OVERLAP)
        NodeToken.objects.filter(pk=token.pk).update(expires_at=ends)
        audit_record(
            actor=_actor(actor),
            action="node_token.rotate",
            obj=token,
            after={"expires_at": ends.isoformat(), "replaced_by": new.prefix},
            request=request,
        )
    return new, secret


def node_token_authenticate(*, secret: str) -> NodeToken | None:
    token = NodeToken.objects.select_related("node").filter(digest=node_token_digest(secret)).first()
    if token is None or not token.is_usable():
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        NodeToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def node_token_revoke(*, token: NodeToken, actor: User | None, request: HttpRequest | None = None) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=_actor(actor), action="node_token.revoke", obj=token, request=request)
