"""One admission pass over the ordered queue.

Pass 1 admits jobs inside their project's quota, project heads in global order (a heap of heads),
strictly in order inside a project: the first job that cannot start stops its project, never the
others. A job over its owner's per-user cap is skipped, not blocking (the cap is the user's, not the
project's). Pass 2 lets preemptible heads stopped by quota borrow idle quota of their cohort.
Pass 1 runs first so a returning borrower never takes back what a lender is waiting for.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from workloads.queue.capacity import Ledger, Limit, NodeCap, Placement
from workloads.queue.model import Admission, Code, JobId, PendingJob, Usage
from workloads.queue.ordering import sort_key


@dataclass(frozen=True)
class Block:
    """Why a job does not start now. `grants`: the active grants a quota sentence names, as
    (GPU type, GPUs) with "" for grants of any type."""

    code: Code
    numbers: Mapping[str, float] = field(default_factory=dict)
    grants: tuple[tuple[str, int], ...] = ()
    held: tuple[str, ...] = ()  # nodes held for the job (workloads.queue.hold)


# What a cycle tries for a job no node can take now (reclaiming lent GPUs, holding nodes for a job
# of several workers): a Block that replaces the one given, or None.
Reclaim = Callable[[PendingJob, Ledger, Block], Block | None]


@dataclass
class PassResult:
    admitted: list[Admission] = field(default_factory=list)
    blocks: dict[JobId, Block] = field(default_factory=dict)
    heads: dict[str, JobId] = field(default_factory=dict)  # project -> the job that stops it


def _cap_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block | None:
    cap = lim.caps.get(job.owner)
    if cap is not None:
        mine = ledger.user(job.project, job.owner)
        for unit, used, need, top in (
            ("gpus", mine.gpus, job.total_gpus, cap.gpus),
            ("slices", mine.slices, job.slices, cap.slices),
            ("jobs", mine.jobs, 1, cap.jobs),
        ):
            if need and used + need > top:
                return Block("user_cap", {"used": used, "limit": top, "need": need, unit: 1})
    use = ledger.use(job.project)
    if use.jobs + 1 > lim.jobs:
        return Block("max_jobs", {"used": use.jobs, "limit": lim.jobs, "need": 1})
    return None


def _grants(lim: Limit) -> tuple[tuple[str, int], ...]:
    typed = sorted((t, n) for t, n in lim.grant_types.items() if n)
    untyped = lim.grant_gpus - sum(n for _, n in typed)
    return ((("", untyped),) if untyped else ()) + tuple(typed)


def quota_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block | None:
    use = ledger.use(job.project)
    if job.gpus and use.gpus + job.total_gpus > lim.gpus:
        numbers = {"used": use.gpus, "limit": lim.gpus, "need": job.total_gpus, "grants": lim.grant_gpus}
        if job.gpu_type is not None and job.gpu_type in lim.gpu_types:
            # The type's own use and limit: a grant that starts it must cover both (explain's hint).
            numbers["type_used"] = ledger.types.get((job.project, job.gpu_type), 0)
            numbers["type_limit"] = lim.gpu_types[job.gpu_type]
        return Block("quota", numbers, _grants(lim))
    if job.slices and use.slices + job.slices > lim.slices:
        return Block("quota", {"used": use.slices, "limit": lim.slices, "need": job.slices, "slices": 1})
    return None


def resource_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block | None:
    """The project's CPU and memory headroom: hard limits (the namespace ResourceQuota's), which no
    grant or borrowing raises, so a job over them waits instead of being refused by the API server."""
    if not (job.cpu_millicores or job.memory_mib):
        return None
    use = ledger.use(job.project)
    cpu, memory = job.cpu_millicores * job.workers, job.memory_mib * job.workers
    if lim.cpu is not None and cpu and use.cpu + cpu > lim.cpu:
        return Block("quota_cpu", {"used": use.cpu, "limit": lim.cpu, "need": cpu})
    if lim.memory is not None and memory and use.memory + memory > lim.memory:
        return Block("quota_memory", {"used": use.memory, "limit": lim.memory, "need": memory})
    return None


def borrow_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block | None:
    pool = ledger.pool.get(lim.cohort)
    used = ledger.pool_used.get(lim.cohort)
    tot_g, tot_s = (pool.gpus, pool.slices) if pool else (0, 0)
    use_g, use_s = (used.gpus, used.slices) if used else (0, 0)
    idle = tot_g - use_g - ledger.pool_reserved.get(lim.cohort, 0)
    idle_s = tot_s - use_s - ledger.pool_reserved_slices.get(lim.cohort, 0)
    if job.total_gpus > idle or job.slices > idle_s:
        numbers = {"idle": max(0, idle_s if job.slices else idle), "need": job.total_gpus or job.slices}
        return Block("no_borrow", {**numbers, "slices": 1} if job.slices else numbers)
    return None


def _type_ok(job: PendingJob, ledger: Ledger, lim: Limit, gpu_type: str) -> bool:
    top = lim.gpu_types.get(gpu_type)
    return top is None or ledger.types.get((job.project, gpu_type), 0) + job.total_gpus <= top


def place_gpus(job: PendingJob, ledger: Ledger, lim: Limit, resources: bool = True) -> Placement | None:
    """Best fit: the schedulable node of the right type with the fewest free GPUs that still fit."""
    best: tuple[int, str] | None = None
    check = resources and bool(job.cpu_millicores or job.memory_mib)
    for name, node in ledger.nodes.items():
        if not node.serves(job) or node.free < job.gpus:
            continue
        if not _type_ok(job, ledger, lim, node.gpu_type) or (check and not node.fits(job)):
            continue
        if best is None or (node.free, name) < best:
            best = (node.free, name)
    return Placement(best[1], job.gpus, ()) if best else None


def worker_room(job: PendingJob, node: NodeCap) -> int:
    """How many of the job's workers the node could host now (at most all of them)."""
    room = job.workers
    for free, each in ((node.free, job.gpus), (node.cpu, job.cpu_millicores), (node.memory, job.memory_mib)):
        if free is not None and each:
            room = min(room, free // each)
    return room


def place_workers(job: PendingJob, ledger: Ledger, lim: Limit) -> Placement | None:
    """Every worker of the job on a node of one GPU type, or None: never some of them. The fewest
    nodes (fullest first), the last one the tightest that still fits; with as few nodes, nodes
    under one switch (operators' node label); then the GPU type and switch by name. Each node
    appears once per worker it hosts, in worker order."""
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for name, node in ledger.nodes.items():
        room = worker_room(job, node) if node.serves(job) else 0
        if room and _type_ok(job, ledger, lim, node.gpu_type):
            groups.setdefault((node.gpu_type, ""), []).append((room, name))
            if node.switch:
                groups.setdefault((node.gpu_type, node.switch), []).append((room, name))
    best: tuple[int, bool, tuple[str, str], list[tuple[int, str]]] | None = None
    for key, found in groups.items():
        chosen = _fewest_nodes(found, job.workers)
        if chosen is None:
            continue
        rank = (len(chosen), not key[1], key)  # a switch's own group before the type's whole
        if best is None or rank < best[:3]:
            best = (*rank, chosen)
    if best is None:
        return None
    nodes = tuple(name for room, name in best[3] for _ in range(room))
    return Placement(nodes[0], job.gpus, (), nodes)


def _fewest_nodes(rooms: list[tuple[int, str]], workers: int) -> list[tuple[int, str]] | None:
    """(workers it takes, node) for the fewest nodes that hold `workers`: the roomiest first, and for
    the last the one with the least room that still holds the rest (best fit)."""
    ordered = sorted(rooms, key=lambda r: (-r[0], r[1]))
    chosen: list[tuple[int, str]] = []
    left = workers
    for index, (room, name) in enumerate(ordered):
        if room >= left:
            fits = [r for r in ordered[index:] if r[0] >= left]
            last = min(fits, key=lambda r: (r[0], r[1]))
            return [*chosen, (left, last[1])]
        chosen.append((room, name))
        left -= room
    return None


def place_slices(job: PendingJob, ledger: Ledger, resources: bool = True) -> Placement | None:
    """Best fit on one shared GPU; else spread over the shared GPUs of one node, fullest card last."""
    single: tuple[int, str, int] | None = None
    spread: tuple[int, str] | None = None
    check = resources and bool(job.cpu_millicores or job.memory_mib)
    for name, node in ledger.nodes.items():
        if not node.serves(job):
            continue
        if (check and not node.fits(job)) or not node.slices_for(job.project):
            continue
        for idx, free in node.slices.items():
            if free >= job.slices and (single is None or (free, name, idx) < single):
                single = (free, name, idx)
        total = sum(node.slices.values())
        if total >= job.slices and (spread is None or (total, name) < spread):
            spread = (total, name)
    if single is not None:
        return Placement(single[1], 0, ((single[2], job.slices),))
    if spread is None:
        return None
    left, parts = job.slices, []
    for idx, free in sorted(ledger.nodes[spread[1]].slices.items(), key=lambda kv: (-kv[1], kv[0])):
        take = min(left, free)
        if take:
            parts.append((idx, take))
            left -= take
    return Placement(spread[1], 0, tuple(parts))


def _node_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block:
    types = {n.gpu_type for n in ledger.nodes.values()}
    if job.gpu_type is not None and job.gpu_type not in types:
        return Block("unknown_type", {"need": job.gpus or job.slices})
    if job.gpus and job.gpu_type is not None and not _type_ok(job, ledger, lim, job.gpu_type):
        used = ledger.types.get((job.project, job.gpu_type), 0)
        extra = lim.grant_types.get(job.gpu_type, 0)
        numbers = {
            "used": used,
            "limit": lim.gpu_types[job.gpu_type],
            "need": job.total_gpus,
            "grants": extra,
        }
        return Block("quota_type", numbers, ((job.gpu_type, extra),) if extra else ())
    if job.workers > 1:
        return _workers_block(job, ledger, lim)
    if job.cpu_millicores or job.memory_mib:
        fits_gpus = place_slices(job, ledger, False) if job.slices else place_gpus(job, ledger, lim, False)
        if fits_gpus is not None:
            return _resources_block(job, ledger, lim)
    if job.slices:
        largest = _largest_slices(ledger, job)
        if _largest_slices(ledger, job, mine=False) >= job.slices > largest:
            return Block("slices_held", {"need": job.slices, "largest": largest, "slices": 1})
        return Block("no_node", {"need": job.slices, "largest": largest, "slices": 1})
    return Block("no_node", {"need": job.gpus, "largest": _largest(ledger, job)})


def _workers_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block:
    """Not every worker has a place: how many could start now, on how many nodes of the job's kind."""
    room = {t: 0 for t in {n.gpu_type for n in ledger.nodes.values() if n.serves(job)}}
    nodes = dict(room)
    for node in ledger.nodes.values():
        if node.serves(job) and _type_ok(job, ledger, lim, node.gpu_type):
            fit = worker_room(job, node)
            room[node.gpu_type] += fit
            nodes[node.gpu_type] += 1 if fit else 0
    most = max(room, key=lambda t: (room[t], nodes[t]), default="")
    numbers = {
        "need": job.gpus,
        "workers": job.workers,
        "fit": room.get(most, 0),
        "nodes": nodes.get(most, 0),
    }
    return Block("no_node", numbers)


def _resources_block(job: PendingJob, ledger: Ledger, lim: Limit) -> Block:
    """GPUs are free somewhere, but no such node also has the job's CPU and memory free: say which,
    with the most any such node has (memory among the nodes with enough CPU)."""
    candidates = [n for n in ledger.nodes.values() if _gpus_fit(job, ledger, lim, n)]
    size = {"gpus": job.slices or job.gpus, "slices": 1 if job.slices else 0}
    cpus = [n.cpu for n in candidates if n.cpu is not None]
    if cpus and max(cpus) < job.cpu_millicores:
        return Block("node_cpu", {"need": job.cpu_millicores, "largest": max(cpus), **size})
    enough_cpu = [n for n in candidates if n.cpu is None or n.cpu >= job.cpu_millicores]
    mems = [n.memory for n in enough_cpu if n.memory is not None]
    return Block("node_memory", {"need": job.memory_mib, "largest": max(mems, default=0), **size})


def _gpus_fit(job: PendingJob, ledger: Ledger, lim: Limit, node: NodeCap) -> bool:
    if not node.serves(job):
        return False
    if job.slices:
        return node.slices_for(job.project) and sum(node.slices.values()) >= job.slices
    return node.free >= job.gpus and _type_ok(job, ledger, lim, node.gpu_type)


def _largest(ledger: Ledger, job: PendingJob) -> int:
    ok = [n.free for n in ledger.nodes.values() if n.serves(job)]
    return max(ok, default=0)


def _largest_slices(ledger: Ledger, job: PendingJob, *, mine: bool = True) -> int:
    """The most free slices on one node; `mine`: only nodes whose shared GPUs the job's project
    may use (no other project there, or all marked cross-project)."""
    ok = [
        sum(n.slices.values())
        for n in ledger.nodes.values()
        if n.serves(job) and (not mine or n.slices_for(job.project))
    ]
    return max(ok, default=0)


def attempt(job: PendingJob, ledger: Ledger, borrow: bool) -> Admission | Block:
    """Admit `job` against the ledger (taking its capacity) or say what stops it."""
    ledger.unhold(job.id)
    lim = ledger.limit(job.project)
    blocked = _cap_block(job, ledger, lim) or resource_block(job, ledger, lim)
    if blocked is not None:
        return blocked
    over = quota_block(job, ledger, lim)
    if over is not None and not (borrow and job.preemptible):
        return over
    if over is not None:
        no_pool = borrow_block(job, ledger, lim)
        if no_pool is not None:
            return no_pool
    if job.workers > 1:
        place = place_workers(job, ledger, lim)
    else:
        place = place_slices(job, ledger) if job.slices else place_gpus(job, ledger, lim)
    if place is None:
        return _node_block(job, ledger, lim)
    ledger.take(job, place)
    return Admission(job.id, place.node, place.gpus, place.slice_placement, over is not None, place.nodes)


def project_queues(ordered: list[PendingJob]) -> dict[str, list[PendingJob]]:
    queues: dict[str, list[PendingJob]] = {}
    for job in ordered:
        if not job.held:
            queues.setdefault(job.project, []).append(job)
    return queues


# Each project's next job and the rest of its queue, read lazily.
Heads = dict[str, tuple[PendingJob, Iterator[PendingJob]]]


def _heads(queues: Mapping[str, Iterator[PendingJob]]) -> Heads:
    heads: Heads = {}
    for project, rest in queues.items():
        first = next(rest, None)
        if first is not None:
            heads[project] = (first, rest)
    return heads


def _drain(
    heads: Heads, ledger: Ledger, usage: Usage, borrow: bool, reclaim: Reclaim | None, out: PassResult
) -> Heads:
    """Admit in queue order across projects; returns the heads each blocked project stopped at."""
    heap = [(sort_key(job, usage), project) for project, (job, _) in heads.items()]
    heapq.heapify(heap)
    stopped: Heads = {}
    while heap:
        _, project = heapq.heappop(heap)
        job, rest = heads[project]
        got = attempt(job, ledger, borrow)
        # Borrowed slices may be what holds a node for another project: reclaiming them frees it too.
        if isinstance(got, Block) and got.code in ("no_node", "slices_held") and reclaim is not None:
            got = reclaim(job, ledger, got) or got
        if isinstance(got, Admission):
            out.admitted.append(got)
            out.blocks.pop(job.id, None)
            out.heads.pop(project, None)
        else:
            out.blocks[job.id] = got
            if got.code != "user_cap":
                out.heads[project] = job.id
                stopped[project] = (job, rest)
                continue
        after = next(rest, None)
        if after is not None:
            heads[project] = (after, rest)
            heapq.heappush(heap, (sort_key(after, usage), project))
    return stopped


def admit_queues(
    queues: Mapping[str, Iterator[PendingJob]],
    ledger: Ledger,
    usage: Usage,
    borrowing: bool,
    reclaim: Reclaim | None,
) -> PassResult:
    """Pass 1 inside quota (with reclaim for lenders), then pass 2 borrowing for preemptible heads."""
    out = PassResult()
    stopped = _drain(_heads(queues), ledger, usage, False, reclaim, out)
    if not borrowing:
        return out
    resume = {
        p: head
        for p, head in stopped.items()
        if out.blocks[head[0].id].code == "quota" and head[0].preemptible
    }
    _drain(resume, ledger, usage, True, None, out)
    return out


def admit_all(
    ordered: list[PendingJob], ledger: Ledger, usage: Usage, borrowing: bool, reclaim: Reclaim | None
) -> PassResult:
    """`admit_queues` over an already ordered list (what-if estimates)."""
    queues = {p: iter(q) for p, q in project_queues(ordered).items()}
    return admit_queues(queues, ledger, usage, borrowing, reclaim)
