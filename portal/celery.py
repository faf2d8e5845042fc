"""The Celery app. Tasks are thin and id-keyed; the broker is Redis in production, memory embedded."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal", amqp="portal.broker:PortalAMQP")  # reconnects within 2 s of the broker's return
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
