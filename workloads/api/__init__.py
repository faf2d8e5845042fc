"""The REST API of the workloads app: `jobs` (jobs, templates, logs, accounting) and `queue`
(grants and usage)."""
