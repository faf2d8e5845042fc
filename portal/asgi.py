"""ASGI entry: HTTP through Django, websockets through Channels (authenticated, origin-checked)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.core.asgi import get_asgi_application

django_asgi = get_asgi_application()

from portal.body_limit import BodyLimit  # noqa: E402
from portal.gcfreeze import freeze_startup_objects  # noqa: E402
from portal.routing import websocket_urlpatterns  # noqa: E402

freeze_startup_objects()  # a full collection stops every request in flight

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
