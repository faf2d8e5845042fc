"""Top layer: settings, URLs, ASGI and Channels routing, the Celery app, the controller and the demo.

The Celery app is loaded when Django starts (`PortalConfig.ready`), not on import of this package,
so importing a module of this package starts no Celery; `celery -A portal` finds `portal.celery.app`
by itself.
"""
