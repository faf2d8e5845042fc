"""Drill sizes: a CI size in `make test`, the full size of docs/reliability.md in `make soak`
(which sets GPUPORTAL_SOAK=1)."""

from __future__ import annotations

import os

SOAK = os.environ.get("GPUPORTAL_SOAK") == "1"
