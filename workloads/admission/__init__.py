"""Admission: the I/O around the pure queue policy (`workloads.queue`).

- `live`: what the cluster's Nodes and Pods leave free right now (read, never written).
- `state`: the database's queue, quotas, grants and usage as the policy's `ClusterState`.
- `cycle`: one admission cycle under the advisory lock, applied through `workloads.services.queue`.
"""
