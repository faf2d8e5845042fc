"""Page routes of the gpu app (mounted under /cluster/ by portal/urls.py)."""

from django.urls import path

from gpu import views

app_name = "gpu"
urlpatterns = [
    path("", views.cluster_map, name="cluster"),
    path("nodes/<str:name>/", views.node_detail, name="node"),
]
