"""REST API of the gpu app: the node agents' ingest endpoint and read-only nodes and GPUs."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpu import app_settings, metrics, selectors
from gpu.authentication import IsNodeAgent, NodeAgent, NodeTokenAuthentication, ServiceAccountAuthentication
from gpu.ingest import ingest_batch, refuse_unread
from gpu.models import Gpu, Node


class IngestAcceptedSerializer(serializers.Serializer[Any]):
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()


class IngestView(APIView):
    """POST /api/v1/ingest/samples: one batch of samples from a node agent (docs/telemetry-contract.md)."""

    # Node tokens first: they are recognised by their prefix without a call to Kubernetes.
    authentication_classes = [NodeTokenAuthentication, ServiceAccountAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes: list[Any] = []

    @extend_schema(
        request=None,
        responses={200: IngestAcceptedSerializer, 400: OpenApiResponse(description="Invalid sample(s).")},
    )
    def post(self, request: Request) -> Response:
        started = time.perf_counter()
        stream = request.stream  # None for an empty body
        body = stream.read(app_settings.max_body_bytes() + 1) if stream is not None else b""
        if len(body) > app_settings.max_body_bytes():
            raise refuse_unread("The batch is too large; send at most 5000 samples.")
        agent = request.user
        assert isinstance(agent, NodeAgent)  # noqa: S101 - IsNodeAgent guarantees it
        result = ingest_batch(node=agent.node, raw=body)
        metrics.ingested(
            node=agent.node.name,
            accepted=result.accepted,
            duplicates=result.duplicates,
            seconds=time.perf_counter() - started,
        )
        return Response({"accepted": result.accepted, "duplicates": result.duplicates})


class GpuSerializer(serializers.ModelSerializer[Gpu]):
    node = serializers.CharField(source="node.name", read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "uuid",
            "node",
            "index",
            "model",
            "memory_mib",
            "sharing_mode",
            "slices",
            "cross_project",
            "health",
            "in_service",
            "last_seen",
        ]
        read_only_fields = fields


class NodeSerializer(serializers.ModelSerializer[Node]):
    gpus = GpuSerializer(many=True, read_only=True)
    ready = serializers.BooleanField(source="is_ready", read_only=True)

    class Meta:
        model = Node
        fields = [
            "name",
            "labels",
            "capacity",
            "allocatable",
            "conditions",
            "ready",
            "cordoned",
            "gpu_model",
            "gpu_count",
            "last_seen",
            "gpus",
        ]
        read_only_fields = fields


class NodeViewSet(viewsets.ReadOnlyModelViewSet[Node]):
    """The cluster's nodes and their GPUs (inventory; live numbers come over websockets)."""

    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9.-]+"

    def get_queryset(self) -> Any:
        return selectors.node_list().prefetch_related("gpus")


class GpuViewSet(viewsets.ReadOnlyModelViewSet[Gpu]):
    serializer_class = GpuSerializer
    lookup_field = "uuid"
    lookup_value_regex = r"[A-Za-z0-9-]+"

    def get_queryset(self) -> Any:
        return selectors.gpu_list()
