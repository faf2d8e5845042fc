"""Pages: the cluster map and a node page. Both paint from the database, then go live over websockets."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.models import User
from gpu import selectors
from gpu.visibility import redact


def _viewer(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - login_required guarantees it
    return user


@login_required
def cluster_map(request: HttpRequest) -> HttpResponse:
    namespaces = selectors.user_namespaces(user=_viewer(request))
    nodes = list(selectors.node_list().prefetch_related("gpus"))
    gpus = [gpu for node in nodes for gpu in node.gpus.all()]
    latest = selectors.latest_frames(gpus=gpus)
    tiles: dict[str, Any] = {uuid: redact(frame, namespaces) for uuid, frame in latest.items()}
    rows = [{"node": node, "gpus": [(gpu, tiles.get(gpu.uuid)) for gpu in node.gpus.all()]} for node in nodes]
    context = {"rows": rows, "initial": tiles, "operator": namespaces is None}
    return render(request, "gpu/cluster.html", context)


@login_required
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    namespaces = selectors.user_namespaces(user=_viewer(request))
    node = selectors.node_get(name=name)
    gpus = list(selectors.gpu_list(node=node))
    history = {
        uuid: [redact(frame, namespaces) for frame in frames]
        for uuid, frames in selectors.history(gpus=gpus, minutes=15).items()
    }
    context = {"node": node, "gpus": gpus, "history": history, "operator": namespaces is None}
    return render(request, "gpu/node.html", context)
