"""The only package that talks to the Kubernetes API (import-linter enforces it)."""
