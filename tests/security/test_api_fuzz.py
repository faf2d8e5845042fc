"""The API fuzz (docs/reliability.md): Schemathesis over the whole OpenAPI with a member's and a
viewer's token, every check on (no 5xx, no response off its schema, no schema-invalid input accepted,
no schema-valid input refused but for the rules in api_fuzz.RULES), stateful links on. A CI size in
`make test`; `make soak` (GPUPORTAL_SOAK=1) runs many more examples and scenarios."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.personas import World
from tests.security import api_fuzz
from tests.security.populated import Populated, populate

pytestmark = pytest.mark.django_db
WHO = ["member", "viewer"]


@pytest.fixture
def app(world: World) -> Iterator[tuple[Any, Populated]]:
    populated = populate(world)
    with api_fuzz.wsgi_app() as wsgi:
        yield wsgi, populated


@pytest.mark.parametrize("who", WHO)
def test_every_operation_passes_every_check(app: tuple[Any, Populated], who: str) -> None:
    wsgi, populated = app
    user = getattr(populated.world, who)
    caller = api_fuzz.Caller(user)
    schema = api_fuzz.load_schema(wsgi)
    failures = api_fuzz.fuzz_operations(schema, caller, api_fuzz.RealRows.of(populated, user))
    assert not failures, f"{len(failures)} operations failed:\n\n" + "\n\n".join(failures)


@pytest.mark.parametrize("who", WHO)
def test_stateful_links_pass_every_check(app: tuple[Any, Populated], who: str) -> None:
    wsgi, populated = app
    caller = api_fuzz.Caller(getattr(populated.world, who))
    machine, links = api_fuzz.stateful_machine(api_fuzz.load_schema(wsgi), caller)
    assert links >= 10  # inferred from the schema: create -> read/update/delete, list -> item, …
    api_fuzz.run_stateful(machine)
