"""The operators' admin pages of the workloads app: `jobs` (jobs and what hangs off them) and
`queue` (the admission queue, grants and queue settings). Importing both registers them."""

from workloads.admin import jobs, queue

__all__ = ["jobs", "queue"]
