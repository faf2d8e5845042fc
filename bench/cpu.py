"""Where the machine's CPU went during a measurement: CPU seconds per kind of process between two
snapshots of every process (psutil). The profile a benchmark prints beside a missed goal, to say what
bounds it from numbers rather than a guess. A process that ended in between (a Postgres backend of a
closed connection, say) is counted with its parent, who waited for it; what the whole machine spent
(/proc/stat) beyond all that is its own line, and the kernel's interrupt work (loopback networking is
done there) another, so nothing is silently left out."""

from __future__ import annotations

import os
from typing import NamedTuple

import psutil

# First match wins: (a word in the command line, the kind it is reported as).
KINDS = (
    ("locust", "load generator (locust)"),
    ("kube-apiserver", "kube-apiserver"),
    ("etcd", "etcd"),
    ("kube-controller-manager", "controller-manager"),
    ("kube-scheduler", "scheduler"),
    ("kwok", "kwok"),
    ("postgres", "postgres"),
    ("redis-server", "redis"),
    ("uvicorn", "web (uvicorn)"),
    ("daphne", "web (daphne)"),
    ("worker", "celery worker"),
    ("beat", "celery beat"),
    ("controller", "portal controller"),
)


def _kind(proc: psutil.Process | None, parent: bool = True) -> str:
    """By its command line, or its parent's (uvicorn's workers are multiprocessing children)."""
    if proc is None:
        return "other"
    if proc.pid == os.getpid():
        return "this process (the benchmark or test)"
    try:
        line = " ".join(proc.cmdline()) or proc.name()
        kind = next((kind for word, kind in KINDS if word in line), "other")
        return _kind(proc.parent(), parent=False) if kind == "other" and parent else kind
    except psutil.Error:
        return "other"


MACHINE, INTERRUPTS = -1, -2  # pseudo-pids: the machine's process CPU seconds, and its interrupt work
UNREAD = "not read (processes that ended in between)"
IRQ = "kernel interrupts (softirq: network)"


class Seen(NamedTuple):
    kind: str
    cpu: float  # its own CPU seconds so far
    reaped: float  # CPU seconds of its children that ended and it waited for
    parent: int


def _machine() -> tuple[float, float]:
    t = psutil.cpu_times()  # guest time is already inside user on Linux
    irq = float(getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))
    return float(t.user + t.nice + t.system + getattr(t, "steal", 0.0)), irq


def snapshot() -> dict[int, Seen]:
    """Every process that can be read by pid, and MACHINE and INTERRUPTS."""
    busy, irq = _machine()
    out = {MACHINE: Seen("machine", busy, 0.0, 0), INTERRUPTS: Seen(IRQ, irq, 0.0, 0)}
    for proc in psutil.process_iter():
        try:
            t = proc.cpu_times()
            out[proc.pid] = Seen(
                _kind(proc), t.user + t.system, t.children_user + t.children_system, proc.ppid()
            )
        except psutil.Error:
            continue
    return out


def _add(into: dict[str, float], kind: str, seconds: float) -> float:
    into[kind] = into.get(kind, 0.0) + seconds
    return seconds


def _ended(before: dict[int, Seen], after: dict[int, Seen]) -> dict[int, tuple[float, set[str]]]:
    """Parent pid -> (CPU its ended children had at the first snapshot, their kinds)."""
    out: dict[int, tuple[float, set[str]]] = {}
    for pid, was in before.items():
        if pid > 0 and pid not in after:
            cpu, kinds = out.get(was.parent, (0.0, set()))
            out[was.parent] = (cpu + was.cpu, kinds | {was.kind})
    return out


def spent(before: dict[int, Seen], after: dict[int, Seen], into: dict[str, float]) -> None:
    """Add the CPU seconds per kind between the snapshots to `into` (a new pid counts from zero).

    A process that ended in between was counted by its parent when the parent waited for it (a
    Postgres backend by the postmaster, say): what it spent since the first snapshot goes to its own
    kind where the parent's ended children were all of one kind, else to the parent's. Interrupts
    are IRQ; what is left of the machine's CPU is UNREAD."""
    read = 0.0
    ended = _ended(before, after)
    for pid, now in after.items():
        if pid == MACHINE:
            continue
        was = before.get(pid) if pid in before and before[pid].kind == now.kind else None
        used = _add(into, now.kind, now.cpu - (was.cpu if was else 0.0))
        read += used if pid != INTERRUPTS else 0.0
        if was is not None and pid > 0:
            known, kinds = ended.get(pid, (0.0, set()))
            kind = next(iter(kinds)) if len(kinds) == 1 else now.kind
            read += _add(into, kind, max(0.0, now.reaped - was.reaped - known))
    machine = after[MACHINE].cpu - before[MACHINE].cpu
    into[UNREAD] = into.get(UNREAD, 0.0) + max(0.0, machine - read)


def describe(total: dict[str, float], wall_s: float) -> str:
    """'kube-apiserver 41.0 s (35 %), ...' over the `wall_s` both cores had (the share of the sum)."""
    whole = sum(total.values()) or 1.0
    shown = sorted(((k, sec) for k, sec in total.items() if sec >= 0.05), key=lambda item: -item[1])
    parts = [f"{kind} {sec:.1f} s ({100 * sec / whole:.0f} %)" for kind, sec in shown]
    cores = psutil.cpu_count() or 1
    return f"{whole:.1f} CPU s of {wall_s * cores:.0f} available; " + ", ".join(parts)
