"""What a job in one of my projects may use: GET /api/v1/projects/<slug>/allowed/.

The submit form shows the same lists under the project choice (workloads.selectors.submit_catalog);
the API and `gpuctl quota` read them here, so a script can pick an image and a volume by name.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import request_user
from accounts.selectors import project_get
from workloads.selectors import submit_catalog

Allowed = inline_serializer(
    "ProjectAllowed",
    {
        "images": serializers.ListField(
            child=serializers.CharField(),
            help_text="registry/repository pairs; any tag or digest of each is allowed.",
        ),
        "volumes": serializers.ListField(
            child=inline_serializer(
                "ProjectVolumeChoice",
                {
                    "name": serializers.CharField(),
                    "read_only": serializers.BooleanField(help_text="Mounted read-only whatever is asked."),
                },
            ),
        ),
    },
)


class ProjectAllowedView(APIView):
    """The project's allowed images and its volumes (a foreign project is 404)."""

    @extend_schema(operation_id="v1_projects_allowed_retrieve", responses={200: Allowed})
    def get(self, request: Request, project_slug: str) -> Response:
        project = project_get(user=request_user(request), slug=project_slug)
        catalog: dict[str, Any] = submit_catalog(projects=[project])[project.slug]
        volumes = [{"name": name, "read_only": ro} for name, ro in sorted(catalog["volumes"].items())]
        return Response({"images": sorted(catalog["images"]), "volumes": volumes})
