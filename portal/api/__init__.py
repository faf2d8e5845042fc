"""Shared API plumbing: pagination and the one error body shape."""
