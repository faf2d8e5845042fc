"""Per-GPU sharing mode, read live from a JSON file the portal writes (a mounted ConfigMap).

Shape: {"gpus": {"<uuid>": {"mode": "exclusive"|"shared", "slices": N, "in_service": false,
"cross_project": true}}}. GPUs not named get the daemon's defaults; `in_service: false` (the portal
took it out, or found it unhealthy) means the GPU is not offered: Unhealthy in ListAndWatch until the
flag goes; `cross_project: true` lets a shared GPU hold slices of several projects at once. The file
is polled by (inode, mtime, size), because a ConfigMap update swaps a symlink rather than writing
in place; a bad file is logged and the last good one is kept.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_SLICES = 48  # MPS client limit per server on Volta and later


@dataclass(frozen=True)
class Mode:
    shared: bool
    slices: int  # meaningful only when shared

    @property
    def label(self) -> str:
        return f"shared/{self.slices}" if self.shared else "exclusive"


EXCLUSIVE = Mode(shared=False, slices=1)


def parse(text: str, *, default: Mode) -> dict[str, Mode]:
    """Raise ValueError on anything but the documented shape, so a typo never half-applies."""
    raw: Any = json.loads(text)
    gpus = raw.get("gpus") if isinstance(raw, dict) else None
    if not isinstance(gpus, dict):
        raise ValueError('expected {"gpus": {...}}')
    return {str(uuid): _mode(uuid, entry, default) for uuid, entry in gpus.items()}


def out_of_service(text: str) -> frozenset[str]:
    """The GPUs whose entry says `"in_service": false` (call after `parse` accepted `text`)."""
    gpus: dict[str, Any] = json.loads(text)["gpus"]
    return frozenset(uuid for uuid, entry in gpus.items() if entry.get("in_service", True) is False)


def cross_project(text: str) -> frozenset[str]:
    """The GPUs whose entry says `"cross_project": true` (call after `parse` accepted `text`)."""
    gpus: dict[str, Any] = json.loads(text)["gpus"]
    return frozenset(uuid for uuid, entry in gpus.items() if entry.get("cross_project", False) is True)


def _mode(uuid: str, entry: Any, default: Mode) -> Mode:
    if not isinstance(entry, dict) or entry.get("mode") not in ("exclusive", "shared"):
        raise ValueError(f"{uuid}: mode must be 'exclusive' or 'shared'")
    for flag in ("in_service", "cross_project"):
        if not isinstance(entry.get(flag, flag == "in_service"), bool):
            raise ValueError(f"{uuid}: {flag} must be true or false")
    if entry["mode"] == "exclusive":
        return EXCLUSIVE
    slices = entry.get("slices", default.slices)
    if not isinstance(slices, int) or isinstance(slices, bool) or not 1 <= slices <= MAX_SLICES:
        raise ValueError(f"{uuid}: slices must be an integer in 1..{MAX_SLICES}")
    return Mode(shared=True, slices=slices)


class ConfigFile:
    """Cheap change detection: `poll()` re-reads only when the file's identity or mtime moved."""

    def __init__(self, path: Path | None, *, default: Mode) -> None:
        self.path = path
        self.default = default
        self._stamp: tuple[int, int, int] | None = None
        self.modes: dict[str, Mode] = {}
        self.out_of_service: frozenset[str] = frozenset()
        self.cross_project: frozenset[str] = frozenset()
        self.errors = 0

    def poll(self) -> bool:
        """Return True when a new, valid mapping was loaded."""
        if self.path is None:
            return False
        try:
            st = self.path.stat()
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        return self._load() if stamp else self._replace({})

    def _load(self) -> bool:
        if self.path is None:
            return False
        try:
            text = self.path.read_text()
            modes = parse(text, default=self.default)
        except (OSError, ValueError) as exc:
            self.errors += 1
            log.error("sharing config %s rejected, keeping the previous one: %s", self.path, exc)
            return False
        return self._replace(modes, out_of_service(text), cross_project(text))

    def _replace(
        self, modes: dict[str, Mode], out: frozenset[str] = frozenset(), cross: frozenset[str] = frozenset()
    ) -> bool:
        """True when the modes changed (`out_of_service` is applied at once, never waits: see daemon)."""
        changed = modes != self.modes
        self.modes, self.out_of_service, self.cross_project = modes, out, cross
        return changed

    def mode_for(self, uuid: str) -> Mode:
        return self.modes.get(uuid, self.default)
