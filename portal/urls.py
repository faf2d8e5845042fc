from allauth.account.decorators import secure_admin_login
from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from gpu.metrics import metrics_view as gpu_metrics_view
from portal import views
from portal.api.errors import not_found as api_not_found

# The admin signs in through allauth, so its login shares the rate limits and the MFA step.
admin.site.login = secure_admin_login(admin.site.login)  # type: ignore[method-assign]
admin.site.site_header = "GPU portal operations"
admin.site.site_title = "GPU portal admin"

urlpatterns = [
    path("", views.home, name="home"),
    path("", include(("portal.page_urls", "portal"), namespace="portal")),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("me/", include("accounts.urls")),
    path("jobs/", include(("workloads.urls", "workloads"), namespace="workloads")),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file, so the docs need no inline script; Swagger
    # UI sets inline styles, which this one page allows (styles only: scripts stay 'self').
    path(
        "api/docs/",
        csp_update({"style-src": ["'self'", "'unsafe-inline'"]})(
            SpectacularSwaggerSplitView.as_view(url_name="schema")
        ),
        name="api-docs",
    ),
    re_path(r"^api/", api_not_found),  # any rest, a newline too (`.*` stops there: an HTML 404)
    path("cluster/", include("gpu.urls")),
    path("metrics", gpu_metrics_view, name="metrics"),
]

# A database outage answers 503 with a plain message (JSON under /api/) instead of a 500.
handler500 = "portal.views.server_error"
