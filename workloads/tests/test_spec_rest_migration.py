"""The migration that moves the simulation's two columns into the spec's `simulate` (kept in
`spec_rest`): an existing row's values arrive, and going back restores the columns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts.models import Project, User

BEFORE = [("workloads", "0011_job_placement")]
AFTER = [("workloads", "0012_job_spec_rest")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0011() -> Iterator[Any]:
    apps = _migrate(BEFORE)
    try:
        yield apps
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_simulation_columns_move_into_the_spec_and_back(at_0011: Any) -> None:
    # Projects and users as they are now: only the workloads app is migrated back.
    project = Project.objects.create(slug="alpha", name="Alpha")
    owner = User.objects.create(username="m", email="m@example.com")
    Job = at_0011.get_model("workloads", "Job")
    simulated = Job.objects.create(
        project_id=project.pk, owner_id=owner.pk, image="r.example.com/t:1", sim_run_seconds=30
    )
    plain = Job.objects.create(project_id=project.pk, owner_id=owner.pk, image="r.example.com/t:1")

    after = _migrate(AFTER).get_model("workloads", "Job")
    assert after.objects.get(pk=simulated.pk).spec_rest == {
        "simulate": {"run_seconds": 30, "exit_code": None}
    }
    assert after.objects.get(pk=plain.pk).spec_rest == {}

    back = _migrate(BEFORE).get_model("workloads", "Job")
    assert (
        back.objects.get(pk=simulated.pk).sim_run_seconds,
        back.objects.get(pk=plain.pk).sim_run_seconds,
    ) == (
        30,
        None,
    )
