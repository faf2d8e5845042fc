"""A fresh SSH key pair for a job of several workers (workloads/k8s/worker_objects.py)."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from workloads.k8s.worker_objects import SshKey


def new_ssh_key(comment: str) -> SshKey:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return SshKey(private=private.decode(), public=f"{public.decode()} {comment}")
