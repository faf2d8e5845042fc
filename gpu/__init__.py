"""Nodes, GPUs, their health and sharing mode, telemetry ingest and storage, live consumers."""
