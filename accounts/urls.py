from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("projects/<slug:slug>/", views.project_detail, name="project"),
    path("projects/<slug:slug>/members/", views.member_add, name="member-add"),
    path("projects/<slug:slug>/members/<int:pk>/", views.member_change, name="member-change"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
    path("projects/<slug:slug>/webhook/", views.webhook_set, name="webhook-set"),
    path("projects/<slug:slug>/webhook/test/", views.webhook_ping, name="webhook-ping"),
    path("projects/<slug:slug>/webhook/remove/", views.webhook_remove, name="webhook-remove"),
    path("settings/", views.user_settings, name="settings"),
    path("operator/", views.operator_pending, name="operator-pending"),
    path("operator/confirm/<str:token>/", views.operator_confirm, name="operator-confirm"),
    path("notifications/", views.notifications, name="notifications"),
]
