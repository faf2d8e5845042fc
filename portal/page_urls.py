from django.urls import path

from portal import views

urlpatterns = [
    path("dashboard/", views.dashboard, name="dashboard"),
]
