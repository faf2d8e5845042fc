"""The operators' admin pages of the workloads app: `jobs` (jobs and what hangs off them), `queue`
(the admission queue, grants and queue settings) and `volumes` (project volumes). Importing them
registers them."""

from workloads.admin import jobs, queue, volumes

__all__ = ["jobs", "queue", "volumes"]
