"""GPU jobs: state machine, admission, Kubernetes builders and reconcilers, logs, accounting."""
