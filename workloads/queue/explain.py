"""Explanations: position, estimated start, why pending (with its numbers) and what would start the
job sooner. Every hint is checked by re-planning the cycle with the suggested change."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from workloads.queue.admit import Block
from workloads.queue.capacity import Ledger, Placement, build_ledger
from workloads.queue.decide import Decision, decide
from workloads.queue.estimate import estimate_starts, next_end
from workloads.queue.model import (
    ClusterState,
    Explanation,
    Grant,
    JobId,
    PendingJob,
    ProjectQuota,
)

MAX_SHRINK_TRIES = 8
RESOURCE_CODES = ("quota_cpu", "quota_memory", "node_cpu", "node_memory")


def _size(n: int, slices: bool) -> str:
    unit = "slice" if slices else "GPU"
    return f"{n} {unit}{'' if n == 1 else 's'}"


def _hhmm(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M")


def _unit(numbers: Mapping[str, float]) -> str:
    return "slices" if numbers.get("slices") else "jobs" if numbers.get("jobs") else "GPUs"


def _resource_sentence(block: Block, job: PendingJob) -> str:
    """CPU and memory waits, e.g. "waiting for CPU: needs 8000m, 2000m of 16000m free in alpha"."""
    n = {k: int(v) for k, v in block.numbers.items()}
    what, unit = ("CPU", "m") if block.code.endswith("cpu") else ("memory", " MiB")
    if block.code.startswith("quota"):
        free, limit, need = max(0, n["limit"] - n["used"]), n["limit"], n["need"]
        return f"waiting for {what}: needs {need}{unit}, {free}{unit} of {limit}{unit} free in {job.project}"
    gpus = _size(n.get("gpus", 0), bool(n.get("slices"))).replace(" ", " free ", 1)
    most = n["largest"]
    return f"waiting for {what}: no node with {gpus} has {n['need']}{unit} free; the most is {most}{unit}"


def _workers_sentence(n: Mapping[str, int]) -> str:
    """E.g. "needs 4 workers with 4 free GPUs each, each worker on one node: room for 2 now, on 2 nodes"."""
    nodes = f"{n['nodes']} node{'' if n['nodes'] == 1 else 's'}"
    return (
        f"needs {n['workers']} workers with {_size(n['need'], False).replace(' ', ' free ', 1)} each, "
        f"each worker on one node: room for {n['fit']} now, on {nodes}; none starts until all can"
    )


def sentence(block: Block, job: PendingJob) -> str:
    if block.code in RESOURCE_CODES:
        return _resource_sentence(block, job)
    n = {k: int(v) for k, v in block.numbers.items()}
    if block.code == "no_node" and "workers" in n:
        return _workers_sentence(n)
    u = _unit(block.numbers)
    text = {
        "held": "held by an operator",
        "user_cap": f"your per-user cap {n.get('used')}/{n.get('limit')} {u}",
        "max_jobs": f"project runs {n.get('used')}/{n.get('limit')} jobs (max concurrent jobs)",
        "quota": f"project quota {n.get('used')}/{n.get('limit')} {u} in use",
        "quota_type": f"project limit for {job.gpu_type} {n.get('used')}/{n.get('limit')} GPUs in use",
        "no_node": f"no node has {_size(n.get('need', 0), u == 'slices').replace(' ', ' free ', 1)}; "
        f"the largest free block is {n.get('largest')}",
        "slices_held": f"the shared GPUs with {_size(n.get('need', 0), True).replace(' ', ' free ', 1)} "
        "hold another project's jobs (one project per shared GPU unless an operator marks it "
        f"cross-project); the largest free block open to this project is {n.get('largest')}",
        "unknown_type": f"no node has GPU type {job.gpu_type}",
        "no_borrow": f"over project quota, and only {n.get('idle')} idle {u} can be borrowed "
        f"(needs {n.get('need')})",
        "reclaiming": f"waiting for {_size(n.get('gpus', 0), u == 'slices').replace(' ', ' borrowed ', 1)} "
        f"to be returned (notice ends {_hhmm(block.numbers.get('deadline', 0.0))})",
    }.get(block.code, block.code)
    if block.code in ("quota", "quota_type") and block.grants:
        parts = [f"+{n}" + (f" {t}" if t else "") for t, n in block.grants]
        word = "a temporary grant of" if len(parts) == 1 else "temporary grants of"
        text += f", including {word} {' and '.join(parts)}"
    return text


def _starts_now(state: ClusterState, now: datetime, job: PendingJob, quota: ProjectQuota | None) -> bool:
    pending = tuple(job if j.id == job.id else j for j in state.pending)
    quotas = dict(state.quotas)
    if quota is not None:
        quotas[quota.project] = quota
    d = decide(replace(state, pending=pending, quotas=quotas), now)
    return any(a.job_id == job.id for a in d.result.admitted)


def _shrink_hint(state: ClusterState, now: datetime, job: PendingJob) -> str | None:
    if job.workers > 1:
        for k in range(job.workers - 1, max(0, job.workers - 1 - MAX_SHRINK_TRIES), -1):
            if _starts_now(state, now, replace(job, workers=k), None):
                return f"asking {k} worker{'' if k == 1 else 's'} would start now"
        return None
    size, field = (job.gpus, "gpus") if job.gpus else (job.slices, "slices")
    for k in range(size - 1, max(0, size - 1 - MAX_SHRINK_TRIES), -1):
        smaller = replace(job, gpus=k) if field == "gpus" else replace(job, slices=k)
        if _starts_now(state, now, smaller, None):
            return f"asking {_size(k, field == 'slices')} would start now"
    return None


def _grant_starts(
    state: ClusterState, now: datetime, job: PendingJob, gpus: int, gpu_type: str | None
) -> bool:
    base = state.quotas.get(job.project) or ProjectQuota(project=job.project, gpus=0)
    grant = Grant(id=-1, gpus=gpus, slices=0, until=now + timedelta(days=1), gpu_type=gpu_type)
    return _starts_now(state, now, job, replace(base, grants=(*base.grants, grant)))


def _grant_hint(state: ClusterState, now: datetime, job: PendingJob, block: Block) -> str | None:
    """A grant of any type when the project total blocks; a grant of the job's type when its type
    limit blocks (now, or once the total is raised): a typed grant raises both."""
    if block.code not in ("quota", "quota_type") or block.numbers.get("slices"):
        return None
    n = block.numbers
    extra = int(n["used"] + n["need"] - n["limit"])
    if block.code == "quota":
        if _grant_starts(state, now, job, extra, None):
            return f"a temporary grant of +{_size(extra, False)} would start it now"
        if "type_limit" not in n:
            return None
        extra = max(extra, int(n["type_used"] + n["need"] - n["type_limit"]))
    if job.gpu_type is not None and _grant_starts(state, now, job, extra, job.gpu_type):
        return f"a temporary grant of +{extra} {job.gpu_type} would start it now"
    return None


def hints(state: ClusterState, now: datetime, job: PendingJob, block: Block) -> tuple[str, ...]:
    if block.code in ("held", "reclaiming", "unknown_type", "quota_cpu", "quota_memory"):
        return ()
    out = [_shrink_hint(state, now, job), _grant_hint(state, now, job, block)]
    borrow = block.code == "quota" and not job.preemptible and state.settings.borrowing_enabled
    if borrow and _starts_now(state, now, replace(job, preemptible=True), None):
        out.append("marking it preemptible would start it now on borrowed quota")
    any_type = block.code == "no_node" and job.gpu_type is not None
    if any_type and _starts_now(state, now, replace(job, gpu_type=None), None):
        out.append("accepting any GPU type would start it now")
    return tuple(h for h in out if h)


def _next_frees(
    state: ClusterState, now: datetime, job: PendingJob, ledger: Ledger, numbers: dict[str, float]
) -> str:
    """A job of several workers waits for nodes: when the next of them frees, and by whose end. Another
    project's job is named by its project only."""
    serving = {name for name, node in ledger.nodes.items() if node.serves(job)}
    found = next_end(state, now, serving)
    if found is None:
        return ""
    at, running = found
    numbers["frees_at"] = at.timestamp()
    who = (
        f"job {running.name}"
        if running.project == job.project and running.name
        else f"a job of {running.project}"
    )
    return f"; the next frees ≈ {_hhmm(at.timestamp())} when {who} ends"


def _ahead_text(ahead: list[PendingJob]) -> tuple[str, tuple[tuple[int, int], ...]]:
    sizes = Counter((j.total_gpus or j.slices, bool(j.slices)) for j in ahead)
    pairs = sorted(sizes.items(), key=lambda kv: (-kv[0][0], kv[0][1]))
    parts = ", ".join(f"{c}x {_size(s, sl)}" for (s, sl), c in pairs)
    word = "job" if len(ahead) == 1 else "jobs"
    return f"{len(ahead)} {word} ahead of yours: {parts}", tuple((s, c) for (s, _), c in pairs)


def explain_all(state: ClusterState, now: datetime, d: Decision) -> dict[JobId, Explanation]:
    admitted = {a.job_id: a for a in d.result.admitted}
    ledger = build_ledger(state, now)
    by_id = {j.id: j for j in d.ordered}
    for a in d.result.admitted:
        ledger.take(by_id[a.job_id], Placement(a.node, a.gpus, a.slice_placement, a.nodes))
    noticed = replace(state, notices=(*state.notices, *d.reclaimer.notices))
    starts = estimate_starts(noticed, now, d.ordered, d.result.admitted, ledger, d.usage)
    waiting = [j for j in d.ordered if not j.held and j.id not in admitted]
    pos_global = {j.id: i + 1 for i, j in enumerate(waiting)}
    per_project: dict[str, list[PendingJob]] = {}
    out: dict[JobId, Explanation] = {}
    for job in d.ordered:
        queue = per_project.setdefault(job.project, [])
        start = starts.get(job.id)
        out[job.id] = _one(state, now, d, job, queue, pos_global.get(job.id, 0), start, ledger)
        if job.id in pos_global:
            queue.append(job)
    return out


def _one(
    state: ClusterState,
    now: datetime,
    d: Decision,
    job: PendingJob,
    ahead: list[PendingJob],
    pos: int,
    start: datetime | None,
    ledger: Ledger,
) -> Explanation:
    admitted = next((a for a in d.result.admitted if a.job_id == job.id), None)
    if admitted is not None:
        where = ", ".join(dict.fromkeys(admitted.nodes)) or admitted.node
        text = f"starting now on {where}" + (" on borrowed quota" if admitted.borrowing else "")
        return Explanation(job.id, "admitted", {}, 0, 0, now, text)
    block = d.result.blocks.get(job.id)
    if job.held:
        block = Block("held")
    if block is None:
        head = d.result.heads.get(job.project)
        head_block = d.result.blocks.get(head) if head is not None else None
        text, pairs = _ahead_text(ahead)
        if head_block is not None and head is not None:
            for j in ahead:
                if j.id == head:
                    text += f"; the first waits because {sentence(head_block, j)}"
        numbers = {"ahead": float(len(ahead))}
        return Explanation(job.id, "behind_head", numbers, len(ahead) + 1, pos, start, text, (), pairs)
    hint = hints(state, now, job, block)
    pos_p = 0 if job.held else len(ahead) + 1
    text = sentence(block, job)
    numbers = dict(block.numbers)
    if block.code == "no_node" and "workers" in block.numbers:
        text += _next_frees(state, now, job, ledger, numbers)
    if block.held:
        minutes = int(block.numbers.get("waited_s", 0) // 60)
        text += f"; after {minutes} min waiting, {', '.join(block.held)} are held for it as they free up"
    return Explanation(job.id, block.code, numbers, pos_p, pos, start, text, hint, held=block.held)
