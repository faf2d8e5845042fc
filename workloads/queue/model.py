"""Plain inputs and outputs of the admission policy. Frozen dataclasses, no Django, no Kubernetes.

The caller (the admission loop) builds a `ClusterState` from the database each cycle and applies the
`CyclePlan` that `plan_cycle` returns. All GPU counts are whole GPUs; MPS shares are counted in slices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

JobId = int


@dataclass(frozen=True)
class PendingJob:
    """A queued job. Exactly one of `gpus` (whole GPUs on one node) or `slices` (MPS) is > 0.
    `cpu_millicores` and `memory_mib` are its pod's requests (0: not counted). A job of several
    `workers` asks each of them that much (slices: one worker only), every worker on one node."""

    id: JobId
    project: str
    owner: str
    submitted_at: datetime
    gpus: int = 0
    slices: int = 0
    gpu_type: str | None = None
    priority: int = 0
    preemptible: bool = False
    max_runtime_s: int = 86_400
    held: bool = False
    front: bool = False
    cpu_millicores: int = 0
    memory_mib: int = 0
    placement: str = ""  # only nodes set apart for this placement fit ("": the ordinary GPU nodes)
    workers: int = 1

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.workers


@dataclass(frozen=True)
class RunningJob:
    """An admitted or running job. `slice_placement` is ((gpu index on node, slices), ...).
    A job of several workers holds `gpus`, CPU and memory on each of `nodes` (one per worker; `node`
    is the first)."""

    id: JobId
    project: str
    owner: str
    node: str
    started_at: datetime
    gpus: int = 0
    slices: int = 0
    gpu_type: str | None = None
    max_runtime_s: int = 86_400
    borrowing: bool = False
    preemptible: bool = False
    slice_placement: tuple[tuple[int, int], ...] = ()
    cpu_millicores: int = 0
    memory_mib: int = 0
    workers: int = 1
    nodes: tuple[str, ...] = ()
    name: str = ""  # as its project's people know it (explanations name the job whose end frees GPUs)

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.workers


@dataclass(frozen=True)
class SharedGpu:
    """A GPU in MPS-shared mode: `index` on its node, free and total slices."""

    index: int
    free_slices: int
    total_slices: int


@dataclass(frozen=True)
class NodeState:
    """Free whole GPUs already exclude the shared ones and those held by running jobs. Free CPU and
    memory likewise; None: not modelled (no limit)."""

    name: str
    gpu_type: str
    free_gpus: int
    total_gpus: int
    shared: tuple[SharedGpu, ...] = ()
    schedulable: bool = True
    free_cpu_millicores: int | None = None
    free_memory_mib: int | None = None
    # Who holds the node's shared slices: (project, pods or admitted jobs). The kubelet, not the
    # portal, picks the card inside a node, so the node's shared GPUs serve one project at a time
    # unless every one of them is marked cross-project (`slices_cross_project`).
    slice_tenants: tuple[tuple[str, int], ...] = ()
    slices_cross_project: bool = False
    # A node set apart (the local cluster's real node: "real-node") serves only jobs of that placement.
    placement: str = ""
    switch: str = ""  # the network switch the node hangs off, as operators labelled it ("": unknown)


@dataclass(frozen=True)
class UserCap:
    gpus: int
    slices: int
    jobs: int


@dataclass(frozen=True)
class Grant:
    """A temporary quota grant or reservation; counts only while starts_at <= now < until.
    `gpu_type` set: it also raises the project's limit for that GPU type, where the project has one
    (a type without a limit is unlimited and stays so). Either way it raises the project total."""

    id: int
    gpus: int
    slices: int
    until: datetime
    starts_at: datetime | None = None
    gpu_type: str | None = None


@dataclass(frozen=True)
class ProjectQuota:
    """Quota of one project. `cohort` limits borrowing to projects of the same cohort
    (None: the whole cluster is one cohort). `gpu_types` caps whole GPUs per GPU type.
    `cpu_millicores` and `memory_mib` are hard (the namespace ResourceQuota's; no grant or borrowing
    raises them); None: not limited."""

    project: str
    gpus: int
    slices: int = 0
    max_concurrent_jobs: int = 1_000_000
    gpu_types: Mapping[str, int] = field(default_factory=dict)
    user_caps: Mapping[str, UserCap] = field(default_factory=dict)
    grants: tuple[Grant, ...] = ()
    cohort: str | None = None
    cpu_millicores: int | None = None
    memory_mib: int | None = None


@dataclass(frozen=True)
class Usage:
    """Decayed GPU-hours as of `as_of`, per project and per (project, owner)."""

    as_of: datetime
    projects: Mapping[str, float] = field(default_factory=dict)
    users: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    half_life_hours: float = 168.0
    borrowing_enabled: bool = True
    preemption_notice_s: int = 300
    slices_per_gpu: int = 4
    # A job of several workers waiting this long for nodes has nodes held for it as they free up,
    # so a stream of smaller jobs cannot keep taking them (0: never).
    workers_hold_after_s: int = 600


@dataclass(frozen=True)
class PreemptionNotice:
    """A borrowing job `job_id` must give its GPUs (or MPS slices) back to `for_job` at `deadline`."""

    job_id: JobId
    for_job: JobId
    issued_at: datetime
    deadline: datetime


@dataclass(frozen=True)
class ClusterState:
    """Everything one admission cycle needs. `expected_runtime_s` maps (project, owner) or
    (project, "") to a history-based expected runtime (median); max_runtime_s is the fallback."""

    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...]
    nodes: tuple[NodeState, ...]
    quotas: Mapping[str, ProjectQuota]
    usage: Usage
    settings: Settings = Settings()
    notices: tuple[PreemptionNotice, ...] = ()
    expected_runtime_s: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    """Admit `job_id` on `node`: whole GPUs count, or MPS slices per shared GPU index. A job of
    several workers: `nodes` has each worker's node, by worker index (`node` is the first)."""

    job_id: JobId
    node: str
    gpus: int
    slice_placement: tuple[tuple[int, int], ...]
    borrowing: bool
    nodes: tuple[str, ...] = ()


Code = Literal[
    "admitted",
    "held",
    "user_cap",
    "max_jobs",
    "quota",
    "quota_type",
    "no_node",
    "slices_held",
    "quota_cpu",
    "quota_memory",
    "node_cpu",
    "node_memory",
    "behind_head",
    "reclaiming",
    "no_borrow",
    "unknown_type",
]


@dataclass(frozen=True)
class Explanation:
    """Why a job is (not) starting, as machine fields plus the sentence shown to people.
    `numbers` holds the figures the sentence quotes (used, limit, need, largest, ...)."""

    job_id: JobId
    code: Code
    numbers: Mapping[str, float]
    position_project: int
    position_global: int
    estimated_start: datetime | None
    sentence: str
    hints: tuple[str, ...] = ()
    ahead: tuple[tuple[int, int], ...] = ()  # (size, count) of jobs ahead in the project queue
    held: tuple[str, ...] = ()  # nodes held for it (a job of several workers that waited long)


@dataclass(frozen=True)
class CyclePlan:
    admit: list[Admission]
    preempt: list[JobId]
    notices: list[PreemptionNotice]
    withdraw: list[JobId]
    explanations: dict[JobId, Explanation]
    held: dict[str, JobId] = field(default_factory=dict)  # node -> the job it is held for
