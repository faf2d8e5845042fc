"""Model instances from database rows, faster than Django's Model.from_db, for the models loaded by
the hundred: Job (a page of 100 jobs; every admission cycle's active jobs; B9, B4).

- A deferred load's layout is worked out once per query shape. Every list of jobs defers `log_tail`,
  and Django 5.2 tests each concrete field against the list of loaded names for every row.
- The row's values go into the instance's dict at once, which is what Model.__init__ does one setattr
  at a time, unless something expects that path: an init signal's receiver, or an __init__ of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any, Self

from django.db import models
from django.db.models import DEFERRED
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init


@functools.lru_cache(maxsize=64)
def _layout(model: type[models.Model], names: tuple[str, ...] | None) -> tuple[str, ...]:
    """The model's concrete fields a query loading `names` (None: all of them) loaded, in row order."""
    attnames = [f.attname for f in model._meta.concrete_fields]
    wanted = set(attnames if names is None else names)
    return tuple(name for name in attnames if name in wanted)


class FastLoad:
    """Mixed into a model, before models.Model: its rows become instances as described above."""

    @classmethod
    def from_db(cls, db: str | None, field_names: Collection[str], values: Collection[Any]) -> Self:
        model: type[models.Model] = cls._meta.concrete_model  # type: ignore[attr-defined]
        every = _layout(model, None)
        fields = every if len(values) == len(every) else _layout(model, tuple(field_names))
        if (
            cls.__init__ is not models.Model.__init__
            or pre_init.has_listeners(cls)
            or post_init.has_listeners(cls)
        ):
            loaded = dict(zip(fields, values, strict=True))
            return super().from_db(db, field_names, [loaded.get(name, DEFERRED) for name in every])  # type: ignore[misc,no-any-return]
        new = cls.__new__(cls)
        new.__dict__.update(zip(fields, values, strict=True))
        new._state = state = ModelState()  # type: ignore[attr-defined]
        state.adding, state.db = False, db
        return new
