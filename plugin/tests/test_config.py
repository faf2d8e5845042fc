"""The sharing config file: shape, validation, live reload, last-good on error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plugin.config import EXCLUSIVE, ConfigFile, Mode, parse

DEFAULT = Mode(shared=False, slices=4)


def test_it_parses_the_documented_shape() -> None:
    got = parse(
        '{"gpus": {"GPU-a": {"mode": "shared", "slices": 8}, "GPU-b": {"mode": "exclusive"}}}',
        default=DEFAULT,
    )
    assert got == {"GPU-a": Mode(True, 8), "GPU-b": EXCLUSIVE}


def test_shared_without_slices_takes_the_default_count() -> None:
    assert parse('{"gpus": {"GPU-a": {"mode": "shared"}}}', default=DEFAULT) == {"GPU-a": Mode(True, 4)}


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"gpus": []}',
        '{"gpus": {"GPU-a": {"mode": "mig"}}}',
        '{"gpus": {"GPU-a": {"mode": "shared", "slices": 0}}}',
        '{"gpus": {"GPU-a": {"mode": "shared", "slices": 49}}}',
        '{"gpus": {"GPU-a": {"mode": "shared", "slices": "4"}}}',
        "not json",
    ],
)
def test_it_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError):
        parse(text, default=DEFAULT)


def test_a_bad_update_keeps_the_last_good_config(tmp_path: Path) -> None:
    path = tmp_path / "sharing.json"
    path.write_text('{"gpus": {"GPU-a": {"mode": "shared", "slices": 2}}}')
    cfg = ConfigFile(path, default=DEFAULT)
    assert cfg.poll() is True
    assert cfg.poll() is False  # unchanged file: no re-read
    path.write_text("{broken")
    os.utime(path, ns=(1, 10**18))
    assert cfg.poll() is False
    assert cfg.mode_for("GPU-a") == Mode(True, 2)
    assert cfg.errors == 1
    assert cfg.mode_for("GPU-z") == DEFAULT


def test_a_missing_file_means_defaults_for_every_gpu(tmp_path: Path) -> None:
    cfg = ConfigFile(tmp_path / "absent.json", default=DEFAULT)
    cfg.poll()
    assert cfg.mode_for("GPU-a") == DEFAULT
