"""Ansible connection to a root filesystem on this machine through chroot(8): tests/cluster_setup runs
the node-preparation playbook against a Debian root built with mmdebstrap, with the same modules a real
host gets over SSH. (ansible-core has no chroot connection; community.general's is a whole collection.)
The inventory host's ansible_host is the root directory; needs root."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: chroot
short_description: run tasks inside a local root filesystem with chroot
description: [Runs commands with chroot(8) and copies files under the root directory.]
author: gpu-portal
options:
  remote_addr:
    description: [The root directory.]
    default: inventory_hostname
    vars: [{name: ansible_host}]
"""


class Connection(ConnectionBase):
    transport = "chroot"
    has_pipelining = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.root = ""

    def _connect(self) -> Connection:
        self.root = str(Path(self.get_option("remote_addr")).resolve())
        if not (Path(self.root) / "bin" / "sh").is_file():
            raise AnsibleError(f"{self.root} is not a root filesystem (no /bin/sh)")
        self._connected = True
        return self

    def exec_command(
        self, cmd: str, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        shell = self._play_context.executable or "/bin/sh"
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOME": "/root",
        }
        proc = subprocess.run(
            ["chroot", self.root, shell, "-c", cmd], input=in_data, capture_output=True, env=env, check=False
        )
        return proc.returncode, proc.stdout, proc.stderr

    def _inside(self, path: str) -> str:
        return str(Path(self.root) / path.lstrip("/"))

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        shutil.copyfile(in_path, self._inside(out_path))

    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        shutil.copyfile(self._inside(in_path), out_path)

    def close(self) -> None:
        self._connected = False
