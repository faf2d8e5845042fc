from django.urls import path

from workloads import views

urlpatterns = [
    path("", views.job_list, name="list"),
    path("submit/", views.job_submit, name="submit"),
    path("<uuid:uid>/", views.job_detail, name="detail"),
    path("<uuid:uid>/cancel/", views.job_cancel, name="cancel"),
    path("<uuid:uid>/rerun/", views.job_rerun, name="rerun"),
    path("projects/<slug:slug>/usage/", views.project_usage, name="project_usage"),
]
