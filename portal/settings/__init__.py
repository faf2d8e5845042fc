"""The portal's Django settings: production differs from the demo only by environment variables.

With no environment set the portal runs embedded: an SQLite file, an in-process task broker and
channel layer, one process. Production sets DATABASE_URL, REDIS_URL, SECRET_KEY (or SECRET_KEY_FILE)
and ALLOWED_HOSTS, and gets the hardened defaults (GPUPORTAL_PRODUCTION=1 or DEBUG=0: either one
means production, and a missing secret, host list or Redis then stops the start). Every setting has
a safe development default or raises ImproperlyConfigured.

One module per concern: environment.py declares and reads every environment variable (the only place
that does; its UPPERCASE names are settings, among them every app's tunables), and the others build
Django's settings from those values.
"""

from __future__ import annotations

import django_stubs_ext

from portal.settings.api import *  # noqa: F403
from portal.settings.application import *  # noqa: F403
from portal.settings.auth import *  # noqa: F403
from portal.settings.datastores import *  # noqa: F403
from portal.settings.environment import *  # noqa: F403
from portal.settings.security import *  # noqa: F403
from portal.settings.tasks import *  # noqa: F403

django_stubs_ext.monkeypatch()
