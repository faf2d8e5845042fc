"""One reconciler class per Kubernetes kind (style rule 12)."""
