"""PersistentVolumes for the real node's claims, as pure builders: a static recipe.

A default StorageClass with no provisioner that binds when the first pod is scheduled, and a fixed
set of local volumes, one folder each under the node's directory, pinned to the node. A claim
binds to any free volume at least its size; a released volume is not reused (Retain), and all of
them go with the node. A dynamic provisioner (rancher's local-path-provisioner) would need its own
image and helper pods on every claim, for the handful of claims the tests make.
"""

from __future__ import annotations

from pathlib import Path

from deploy.localcluster.kube import JSON

STORAGE_CLASS = "realnode-local"
VOLUMES = 8
VOLUME_SIZE = "50Gi"  # what the volume reports; the folders share the machine's disk
NODE_LABEL = "gpuportal.local/real-node-volume-of"


def storage_class() -> JSON:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            # Claims that name no class (the chart's default) get this one.
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }


def volume_name(node_name: str, index: int) -> str:
    return f"{node_name}-local-{index}"


def volume(node_name: str, folder: Path, index: int) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name(node_name, index), "labels": {NODE_LABEL: node_name}},
        "spec": {
            "capacity": {"storage": VOLUME_SIZE},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            "local": {"path": str(folder)},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def folders(root: Path) -> list[Path]:
    return [root / f"local-{index}" for index in range(VOLUMES)]
