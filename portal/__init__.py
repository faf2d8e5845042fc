"""Top layer: settings, URLs, ASGI and Channels routing, the Celery app, the controller and the demo."""

# Load the Celery app with Django so that @shared_task binds to it (broker from settings).
from portal.celery import app as celery_app

__all__ = ["celery_app"]
