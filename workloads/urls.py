from django.urls import path

from workloads import idle_views, views

urlpatterns = [
    path("", views.job_list, name="list"),
    path("submit/", views.job_submit, name="submit"),
    path("<uuid:uid>/", views.job_detail, name="detail"),
    path("<uuid:uid>/cancel/", views.job_cancel, name="cancel"),
    path("<uuid:uid>/rerun/", views.job_rerun, name="rerun"),
    path("<uuid:uid>/rerun/edit/", views.job_rerun_edit, name="rerun_edit"),
    path("<uuid:uid>/rerun/rightsized/", views.job_rerun_rightsized, name="rerun_rightsized"),
    path("<uuid:uid>/save-template/", views.job_save_template, name="save_template"),
    path("<uuid:uid>/idle/snooze/", idle_views.job_idle_snooze, name="idle_snooze"),
    path("<uuid:uid>/idle/resume/", idle_views.job_idle_resume, name="idle_resume"),
    path("<uuid:uid>/idle/exempt/", idle_views.job_idle_exempt, name="idle_exempt"),
    path("<uuid:uid>/workers/restart/", idle_views.job_workers_restart, name="workers_restart"),
    path("projects/<slug:slug>/usage/", views.project_usage, name="project_usage"),
    path("projects/<slug:slug>/templates/", views.project_templates, name="templates"),
    path("templates/<int:pk>/edit/", views.template_edit, name="template_edit"),
    path("templates/<int:pk>/delete/", views.template_delete, name="template_delete"),
]
