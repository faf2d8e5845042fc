"""Every API route under /api/v1/; the apps contribute their routers here."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from accounts.api import MembershipViewSet, MeView, NotificationsView, ProjectViewSet, TokenViewSet
from accounts.api_login import PasswordTokenView
from accounts.api_webhooks import ProjectWebhookPingView, ProjectWebhookView
from gpu.api import GpuViewSet, IngestView, NodeViewSet
from workloads.api.idle import ProjectIdleView
from workloads.api.jobs import JobViewSet
from workloads.api.projects import ProjectAllowedView
from workloads.api.queue import GrantViewSet, UsageView
from workloads.api.templates import TemplateViewSet

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
# JSON is the only renderer, so `<route>.json/` duplicates add nothing, and actions without a
# `format` argument would answer them with a 500.
router.include_format_suffixes = False
router.register("projects", ProjectViewSet, basename="project")
router.register(r"projects/(?P<project_slug>[a-z0-9-]+)/members", MembershipViewSet, basename="membership")
router.register("tokens", TokenViewSet, basename="token")
router.register("jobs", JobViewSet, basename="job")
router.register("templates", TemplateViewSet, basename="template")
router.register("grants", GrantViewSet, basename="grant")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GpuViewSet, basename="gpu")

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("me/notifications/", NotificationsView.as_view(), name="me-notifications"),
    path("projects/<slug:project_slug>/webhook/", ProjectWebhookView.as_view(), name="project-webhook"),
    path(
        "projects/<slug:project_slug>/webhook/ping/",
        ProjectWebhookPingView.as_view(),
        name="project-webhook-ping",
    ),
    path("projects/<slug:project_slug>/allowed/", ProjectAllowedView.as_view(), name="project-allowed"),
    path(
        "projects/<slug:project_slug>/idle-reclaim/", ProjectIdleView.as_view(), name="project-idle-reclaim"
    ),
    path("usage/", UsageView.as_view(), name="usage"),
    path("auth/token/", PasswordTokenView.as_view(), name="auth-token"),
    path("ingest/samples", IngestView.as_view(), name="ingest-samples"),  # the agent contract's path
    *router.urls,
]
