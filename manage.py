#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    if sys.argv[1:2] == ["demo"]:
        # The demo shows the pages a user would see, not Django's debug pages (portal/settings/).
        os.environ.setdefault("GPUPORTAL_DEMO", "1")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
