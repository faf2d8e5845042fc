"""REST API for a project's webhook: GET, PUT {url} (managers), DELETE, POST ping/. Secret shown once."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts import selectors, webhooks
from accounts.api import request_user
from accounts.choices import TokenScope
from accounts.models import ProjectWebhook, WebhookDelivery


class WebhookSerializer(serializers.ModelSerializer[ProjectWebhook]):
    # Annotated by selectors.webhook_get, in the same query as the hook.
    delivered = serializers.IntegerField(read_only=True)
    failing = serializers.IntegerField(read_only=True)

    class Meta:
        model = ProjectWebhook
        fields = ["url", "enabled", "created_at", "updated_at", "delivered", "failing"]
        read_only_fields = ["enabled", "created_at", "updated_at"]


class WebhookSetSerializer(serializers.Serializer[Any]):
    url = serializers.URLField(max_length=500)


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once: the HMAC-SHA256 signing key.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class ProjectWebhookView(GenericAPIView[ProjectWebhook]):
    """The project's webhook: job events POSTed to `url`, signed (docs/user-guide.md, "Webhooks")."""

    serializer_class = WebhookSerializer
    write_scope = TokenScope.ADMIN

    def _project(self, slug: str) -> Any:
        return selectors.project_get(user=request_user(self.request), slug=slug)

    @extend_schema(responses={200: WebhookSerializer, 404: OpenApiResponse(description="No webhook set.")})
    def get(self, request: Request, project_slug: str) -> Response:
        project = self._project(project_slug)
        webhooks.require_manager(actor=request_user(request), project=project, what="see its webhook")
        hook = selectors.webhook_get(project=project)
        if hook is None:
            return Response({"detail": "This project has no webhook."}, status=status.HTTP_404_NOT_FOUND)
        return Response(WebhookSerializer(hook).data)

    @extend_schema(
        request=WebhookSetSerializer, responses={200: WebhookSerializer, 201: WebhookCreatedSerializer}
    )
    def put(self, request: Request, project_slug: str) -> Response:
        data = WebhookSetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = self._project(project_slug)
        _, secret = webhooks.webhook_set(
            actor=request_user(request),
            project=project,
            url=data.validated_data["url"],
            request=request,
        )
        hook = selectors.webhook_get(project=project)
        if secret is None:
            return Response(WebhookSerializer(hook).data)
        body = {**WebhookSerializer(hook).data, "secret": secret}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, project_slug: str) -> Response:
        project = self._project(project_slug)
        if not webhooks.webhook_remove(actor=request_user(request), project=project, request=request):
            return Response({"detail": "This project has no webhook."}, status=status.HTTP_404_NOT_FOUND)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliverySerializer(serializers.ModelSerializer[WebhookDelivery]):
    class Meta:
        model = WebhookDelivery
        fields = ["id", "event", "created_at", "attempts", "last_status", "last_error", "delivered_at"]
        read_only_fields = fields


class ProjectWebhookPingView(GenericAPIView[WebhookDelivery]):
    """Send the project's webhook a test event (`ping`), delivered and retried like the others."""

    serializer_class = DeliverySerializer
    write_scope = TokenScope.ADMIN

    @extend_schema(request=None, responses={202: DeliverySerializer})
    def post(self, request: Request, project_slug: str) -> Response:
        project = selectors.project_get(user=request_user(request), slug=project_slug)
        try:
            delivery = webhooks.webhook_ping(actor=request_user(request), project=project, request=request)
        except ValidationError as exc:
            raise NotFound(" ".join(exc.messages)) from None
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
