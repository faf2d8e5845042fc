"""Putting the host back survives cgroup folders that vanish while it walks them.

The shims and the kubelet remove their pods' cgroups while the node stops, so a folder listed a
moment ago can be gone when the walk enters it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import deploy.localcluster.hoststate as hoststate


@pytest.fixture
def tree_losing_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    top = tmp_path / "kubepods"
    (top / "pod-a" / "container-1").mkdir(parents=True)
    (top / "pod-a" / "cgroup.procs").write_text("")
    (top / "pod-b" / "gone").mkdir(parents=True)
    real_scandir = os.scandir

    def scandir_after_someone_else_removed_it(path: str) -> Iterator[os.DirEntry[str]]:
        if Path(path).name == "gone" and Path(path).is_dir():
            Path(path).rmdir()
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_after_someone_else_removed_it)
    return top


def test_reading_the_processes_of_a_tree_skips_a_folder_removed_meanwhile(tree_losing_a_folder: Path) -> None:
    assert hoststate.cgroup_pids({str(tree_losing_a_folder)}) == set()
    assert not (tree_losing_a_folder / "pod-b" / "gone").exists()


def test_removing_a_tree_skips_a_folder_removed_meanwhile_and_removes_the_rest(
    tree_losing_a_folder: Path,
) -> None:
    (tree_losing_a_folder / "pod-a" / "cgroup.procs").unlink()  # a real cgroup's files go with it
    hoststate.remove_cgroup_tree(str(tree_losing_a_folder))
    assert not tree_losing_a_folder.exists()
