"""The admission policy as pure functions: `plan_cycle(ClusterState, now) -> CyclePlan`.

Imports nothing from Django or Kubernetes; see docs/queue.md for the policy as built.
"""

from workloads.queue.model import (
    Admission,
    ClusterState,
    CyclePlan,
    Explanation,
    Grant,
    NodeState,
    PendingJob,
    PreemptionNotice,
    ProjectQuota,
    RunningJob,
    Settings,
    SharedGpu,
    Usage,
    UserCap,
)
from workloads.queue.plan import plan_cycle

__all__ = [
    "Admission",
    "ClusterState",
    "CyclePlan",
    "Explanation",
    "Grant",
    "NodeState",
    "PendingJob",
    "PreemptionNotice",
    "ProjectQuota",
    "RunningJob",
    "Settings",
    "SharedGpu",
    "Usage",
    "UserCap",
    "plan_cycle",
]
