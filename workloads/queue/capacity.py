"""The working ledger of one cycle: free GPUs per node, quota use per project, user and cohort.

`Ledger` is mutable on purpose: one cycle (or one step of the forward simulation) takes capacity
from it as it admits, so two admitted jobs never get the same GPUs and quota is never counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from workloads.queue.model import ClusterState, Grant, PendingJob, ProjectQuota, RunningJob, UserCap

Job = PendingJob | RunningJob


@dataclass
class NodeCap:
    gpu_type: str
    free: int
    schedulable: bool
    slices: dict[int, int] = field(default_factory=dict)  # shared GPU index -> free slices
    cpu: int | None = None  # free millicores; None: not modelled
    memory: int | None = None  # free MiB; None: not modelled
    tenants: dict[str, int] = field(default_factory=dict)  # project -> jobs holding slices here
    cross_project: bool = False
    placement: str = ""
    switch: str = ""
    total: int = 0  # whole GPUs the node offers, free or not

    def serves(self, job: PendingJob) -> bool:
        """Schedulable, of the job's GPU type (if it names one) and set apart for its placement."""
        return self.schedulable and job.gpu_type in (None, self.gpu_type) and self.placement == job.placement

    def slices_for(self, project: str) -> bool:
        """May `project` take slices here: the node's shared GPUs hold no other project, or all of
        them are marked cross-project (model.NodeState.slice_tenants says why per node)."""
        return self.cross_project or all(p == project for p, n in self.tenants.items() if n > 0)

    def tenant(self, job: Job, sign: int) -> None:
        if job.slices:
            self.tenants[job.project] = self.tenants.get(job.project, 0) + sign

    def fits(self, job: Job) -> bool:
        """The node has the job's CPU and memory free (always true where they are not modelled)."""
        return (self.cpu is None or self.cpu >= job.cpu_millicores) and (
            self.memory is None or self.memory >= job.memory_mib
        )


@dataclass
class Use:
    gpus: int = 0
    slices: int = 0
    jobs: int = 0
    cpu: int = 0  # millicores
    memory: int = 0  # MiB


@dataclass(frozen=True)
class Limit:
    """Effective quota of a project right now: base plus active grants."""

    gpus: int
    slices: int
    jobs: int
    gpu_types: dict[str, int]
    caps: dict[str, UserCap]
    cohort: str
    grant_ids: tuple[int, ...]
    grant_gpus: int
    cpu: int | None = None  # millicores; None: not limited
    memory: int | None = None  # MiB; None: not limited
    grant_types: dict[str, int] = field(default_factory=dict)  # GPU type -> GPUs of typed grants


@dataclass(frozen=True)
class Placement:
    """Where a job goes: `gpus` per worker on `node`, or on each of `nodes` (a node once per worker it
    hosts) for a job of several workers."""

    node: str
    gpus: int
    slice_placement: tuple[tuple[int, int], ...]
    nodes: tuple[str, ...] = ()

    @property
    def worker_nodes(self) -> tuple[str, ...]:
        return self.nodes or (self.node,)


def _active(grant: Grant, now: datetime) -> bool:
    return (grant.starts_at is None or grant.starts_at <= now) and now < grant.until


def limit_of(quota: ProjectQuota | None, now: datetime) -> Limit:
    if quota is None:
        return Limit(0, 0, 0, {}, {}, "", (), 0)
    grants = [g for g in quota.grants if _active(g, now)]
    extra_g = sum(g.gpus for g in grants)
    typed: dict[str, int] = {}
    for g in grants:
        if g.gpu_type:
            typed[g.gpu_type] = typed.get(g.gpu_type, 0) + g.gpus
    return Limit(
        gpus=quota.gpus + extra_g,
        slices=quota.slices + sum(g.slices for g in grants),
        jobs=quota.max_concurrent_jobs,
        # A typed grant raises its type's limit where there is one; an unlimited type stays so.
        gpu_types={t: top + typed.get(t, 0) for t, top in quota.gpu_types.items()},
        caps=dict(quota.user_caps),
        cohort=quota.cohort or "",
        grant_ids=tuple(g.id for g in grants),
        grant_gpus=extra_g,
        cpu=quota.cpu_millicores,
        memory=quota.memory_mib,
        grant_types=typed,
    )


@dataclass
class Ledger:
    nodes: dict[str, NodeCap]
    limits: dict[str, Limit]
    proj: dict[str, Use] = field(default_factory=dict)
    types: dict[tuple[str, str], int] = field(default_factory=dict)  # (project, type) -> GPUs
    users: dict[tuple[str, str], Use] = field(default_factory=dict)
    pool: dict[str, Use] = field(default_factory=dict)  # cohort -> quota summed
    pool_used: dict[str, Use] = field(default_factory=dict)
    pool_reserved: dict[str, int] = field(default_factory=dict)  # cohort -> GPUs being reclaimed
    pool_reserved_slices: dict[str, int] = field(default_factory=dict)  # cohort -> slices likewise
    holds: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # job id -> (node, GPUs) held

    def limit(self, project: str) -> Limit:
        if project not in self.limits:
            self.limits[project] = Limit(0, 0, 0, {}, {}, "", (), 0)
        return self.limits[project]

    def use(self, project: str) -> Use:
        return self.proj.setdefault(project, Use())

    def user(self, project: str, owner: str) -> Use:
        return self.users.setdefault((project, owner), Use())

    def cohort_use(self, project: str) -> Use:
        return self.pool_used.setdefault(self.limit(project).cohort, Use())

    def hold(self, job_id: int, node: str, gpus: int) -> None:
        """Take up to `gpus` free GPUs of `node` out of the cycle for job `job_id` (workloads.queue.hold)."""
        held = min(self.nodes[node].free, gpus)
        self.nodes[node].free -= held
        self.holds.setdefault(job_id, []).append((node, held))

    def unhold(self, job_id: int) -> None:
        """Give the GPUs held for `job_id` back to their nodes: its own turn has come."""
        for node, gpus in self.holds.pop(job_id, ()):
            self.nodes[node].free += gpus

    def take(self, job: Job, place: Placement) -> None:
        for name in place.worker_nodes:
            node = self.nodes[name]
            node.free -= place.gpus
            _node_resources(node, job, -1)
        node = self.nodes[place.node]
        for idx, n in place.slice_placement:
            node.slices[idx] -= n
        node.tenant(job, +1)
        self._count(job, node.gpu_type, +1)

    def release(self, job: Job, place: Placement) -> None:
        """Give back a job's GPUs (to its nodes, unless a node is gone) and its quota."""
        for name in place.worker_nodes:
            worker_node = self.nodes.get(name)
            if worker_node is not None:
                worker_node.free += place.gpus
                _node_resources(worker_node, job, +1)
        node = self.nodes.get(place.node)
        if node is not None:
            for idx, n in place.slice_placement:
                node.slices[idx] = node.slices.get(idx, 0) + n
            node.tenant(job, -1)
        self._count(job, node.gpu_type if node else (job.gpu_type or ""), -1)

    def _count(self, job: Job, gpu_type: str, sign: int) -> None:
        """Quota use of all the job's workers (they share one GPU type: admit.place_workers)."""
        for use in (self.use(job.project), self.user(job.project, job.owner), self.cohort_use(job.project)):
            use.gpus += sign * job.total_gpus
            use.slices += sign * job.slices
            use.jobs += sign
            use.cpu += sign * job.cpu_millicores * job.workers
            use.memory += sign * job.memory_mib * job.workers
        key = (job.project, gpu_type)
        self.types[key] = self.types.get(key, 0) + sign * job.total_gpus

    def copy(self) -> Ledger:
        def uses(d: dict[str, Use]) -> dict[str, Use]:
            return {k: Use(v.gpus, v.slices, v.jobs, v.cpu, v.memory) for k, v in d.items()}

        return Ledger(
            nodes={
                k: replace(n, slices=dict(n.slices), tenants=dict(n.tenants)) for k, n in self.nodes.items()
            },
            limits=self.limits,
            proj=uses(self.proj),
            types=dict(self.types),
            users={k: Use(v.gpus, v.slices, v.jobs, v.cpu, v.memory) for k, v in self.users.items()},
            pool=self.pool,
            pool_used=uses(self.pool_used),
            pool_reserved=dict(self.pool_reserved),
            pool_reserved_slices=dict(self.pool_reserved_slices),
            holds={k: list(v) for k, v in self.holds.items()},
        )


def _node_resources(node: NodeCap, job: Job, sign: int) -> None:
    if node.cpu is not None:
        node.cpu += sign * job.cpu_millicores
    if node.memory is not None:
        node.memory += sign * job.memory_mib


def running_placement(job: RunningJob) -> Placement:
    return Placement(job.node, job.gpus, job.slice_placement, job.nodes)


def build_ledger(state: ClusterState, now: datetime) -> Ledger:
    """Node free capacity is taken as given (it already excludes running jobs); quota use is
    counted from the running jobs."""
    nodes = {
        n.name: NodeCap(
            n.gpu_type,
            n.free_gpus,
            n.schedulable,
            {s.index: s.free_slices for s in n.shared},
            n.free_cpu_millicores,
            n.free_memory_mib,
            dict(n.slice_tenants),
            n.slices_cross_project,
            n.placement,
            n.switch,
            n.total_gpus,
        )
        for n in state.nodes
    }
    limits = {p: limit_of(q, now) for p, q in state.quotas.items()}
    ledger = Ledger(nodes=nodes, limits=limits)
    for lim in limits.values():
        tot = ledger.pool.setdefault(lim.cohort, Use())
        tot.gpus += lim.gpus
        tot.slices += lim.slices
    for job in state.running:
        gpu_type = nodes[job.node].gpu_type if job.node in nodes else (job.gpu_type or "")
        ledger._count(job, gpu_type, +1)
    return ledger
