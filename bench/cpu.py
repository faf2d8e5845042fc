"""Where the machine's CPU went during a measurement: CPU seconds per kind of process between two
snapshots of every process (psutil). The profile a benchmark prints beside a missed goal, to say what
bounds it from numbers rather than a guess. A process that ended in between (a Postgres backend of a
closed connection, say) cannot be read any more: what the whole machine spent (/proc/stat) beyond
the processes read is reported as its own line, and the kernel's interrupt work (loopback networking
is done there) as another, so nothing is silently left out."""

from __future__ import annotations

import os

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


def _machine() -> tuple[float, float]:
    t = psutil.cpu_times()  # guest time is already inside user on Linux
    irq = float(getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))
    return float(t.user + t.nice + t.system + getattr(t, "steal", 0.0)), irq


def snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (kind, CPU seconds so far) for every process that can be read, MACHINE and INTERRUPTS."""
    busy, irq = _machine()
    out: dict[int, tuple[str, float]] = {MACHINE: ("machine", busy), INTERRUPTS: (IRQ, irq)}
    for proc in psutil.process_iter():
        try:
            times = proc.cpu_times()
            out[proc.pid] = (_kind(proc), times.user + times.system)
        except psutil.Error:
            continue
    return out


def spent(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], into: dict[str, float]
) -> None:
    """Add the CPU seconds per kind between the snapshots to `into` (a new pid counts from zero), the
    interrupts as IRQ, and what the machine's processes spent beyond those read as UNREAD."""
    read = 0.0
    for pid, (kind, cpu) in after.items():
        if pid == MACHINE:
            continue
        was = before.get(pid)
        used = cpu - (was[1] if was and was[0] == kind else 0.0)
        into[kind] = into.get(kind, 0.0) + used
        read += used if pid != INTERRUPTS else 0.0
    machine = after[MACHINE][1] - before[MACHINE][1]
    into[UNREAD] = into.get(UNREAD, 0.0) + max(0.0, machine - read)


def describe(total: dict[str, float], wall_s: float) -> str:
    """'kube-apiserver 41.0 s (35 %), ...' over the `wall_s` both cores had (the share of the sum)."""
    whole = sum(total.values()) or 1.0
    shown = sorted(((k, sec) for k, sec in total.items() if sec >= 0.05), key=lambda item: -item[1])
    parts = [f"{kind} {sec:.1f} s ({100 * sec / whole:.0f} %)" for kind, sec in shown]
    cores = psutil.cpu_count() or 1
    return f"{whole:.1f} CPU s of {wall_s * cores:.0f} available; " + ", ".join(parts)
