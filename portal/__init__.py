"""Top layer: settings, URLs, ASGI and Channels routing, the Celery app, the controller and the demo."""
