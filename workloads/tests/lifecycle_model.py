"""The fake cluster and helpers of the lifecycle state machine (test_lifecycle_model_check.py),
kept apart so the machine's own file stays readable."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from workloads.choices import ALLOWED_TRANSITIONS, JobState
from workloads.k8s import builders
from workloads.k8s.errors import K8sError
from workloads.services import cluster_sync as sync
from workloads.tests.fakes import FakeKube

# Where reconciler A stops (its chaos points outside a transaction), and what happens meanwhile.
PAUSES = (
    "after_load",
    "before_create",
    "after_create",
    "after_suspend_patch",
    "before_delete",
    "after_delete",
)
OTHERS = ("reconcile", "preempt", "preempt_only", "cancel", "cancel_only", "admit", "kubelet")


@contextlib.contextmanager
def pause_at(hook: Callable[[str], None]) -> Iterator[None]:
    """Run `hook(point)` at each chaos point of the reconcile (workloads/k8s/faults.py names them)."""
    names = vars(sync)  # the module's own binding of the name, which job_sync calls
    original = names["fault_point"]
    names["fault_point"] = hook
    try:
        yield
    finally:
        names["fault_point"] = original


def _reachable() -> dict[str, set[str]]:
    """Transitive closure of the forward graph (a job may take several steps between two looks)."""
    reach = {s: set(t) for s, t in ALLOWED_TRANSITIONS.items()}
    changed = True
    while changed:
        changed = False
        for targets in reach.values():
            more = set().union(*(reach.get(t, set()) for t in targets)) - targets
            if more:
                targets |= more
                changed = True
    return reach


REACH = _reachable()
# Every state some example entered (from the recorded transitions, so a state left within the step
# that entered it counts): the machine must exercise them all.
REACHED: set[str] = set()
OUT_OF_REACH = frozenset({JobState.UNKNOWN, JobState.LOST})


class FaultyKube(FakeKube):
    """The fake cluster, with a 409 on the next create on demand (the object exists: a lost reply)."""

    def __init__(self) -> None:
        super().__init__()
        self.conflict_next_create = False
        self.unavailable_next = False

    def _maybe_5xx(self) -> None:
        if self.unavailable_next:
            self.unavailable_next = False
            raise K8sError(503, "Service Unavailable")

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        self._maybe_5xx()
        return super().get(path, query)

    def patch(self, path: str, body: dict[str, Any], *, apply: bool = False) -> dict[str, Any]:
        self._maybe_5xx()
        return super().patch(path, body, apply=apply)

    def create(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any] | None:
        created = super().create(path, body, dry_run=dry_run)
        if self.conflict_next_create and not dry_run:
            self.conflict_next_create = False
            raise K8sError(409, "AlreadyExists")
        return created

    def k8s_jobs(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for path, obj in self.objects.items():
            if path.startswith("/apis/batch/v1/namespaces/") and "/jobs/" in path:
                uid = obj["metadata"].get("labels", {}).get(builders.UID_LABEL, "")
                out.setdefault(uid, []).append(obj)
        return out


def done(obj: dict[str, Any]) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return ""


def run_covering(
    machine: type[RuleBasedStateMachine], *, examples: int, steps: int, missing: Callable[[], set[str]]
) -> set[str]:
    """Run the machine derandomized (the same examples every run); while `missing()` still names a
    state or move no example reached, run it again with twice the examples, three rounds at most.
    Which paths one fixed sample happens to take changes with the machine's source text, so coverage
    at one size alone is luck; a path that became unreachable still fails all three rounds. Returns
    what is still missing."""
    for round_ in range(3):
        if round_:
            print(f"lifecycle: {sorted(missing())} not reached; again with {examples << round_} examples")
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples << round_, stateful_step_count=steps, deadline=None, derandomize=True
            ),
        )
        if not missing():
            break
    return missing()
