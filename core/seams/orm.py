"""Seams in Django's ORM: the INSERT without `save()` around it (piece 8)
and one model instance made another (13). docs/design/SEAMS.md says what
each replaces or relies on, and why."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connections
from django.db.models import Model

# --- 8. the ORM's INSERT, without save() around it ---------------------------------------


def insert_row(instance: Any) -> None:
    """INSERT `instance` with every column, as `save(force_insert=True)`
    would, and leave it as `save()` leaves a stored instance, except that
    nothing is read back: a field with a `db_default` keeps the value the
    instance holds. Only for a model without parents, signals, an
    auto-incremented key, expressions as values, or fields with a
    placeholder of their own (`get_placeholder`: binary, geometry)."""
    model = type(instance)
    db = model._default_manager.db
    connection = connections[db]
    sql, fields = _insert_statement(model, connection.alias)
    values = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
    instance._state.adding = False
    instance._state.db = db


@functools.cache
def _insert_statement(model: type, alias: str) -> tuple[str, list]:
    """The INSERT of every concrete column of `model`, as Django's compiler
    writes it for one row, made once."""
    from core.db_thread import insert_statement  # here: the waker imports this module, and has no database

    fields = list(model._meta.local_concrete_fields)
    assert not any(hasattr(field, "get_placeholder") for field in fields), "a field with its own placeholder"
    return insert_statement(model, fields, connections[alias]), fields


# --- 13. one instance made another ----------------------------------------------------------


def take_saved_row(instance: Model, saved: Model) -> None:
    """Make `instance` what `saved` (the same model, saved elsewhere) is: its
    field values, whether it is stored and where (`_state`), and what it
    cached, all of which Django keeps in the instance's `__dict__`. `saved`
    is not to be used after: the two share their `_state` and values."""
    instance.__dict__.update(saved.__dict__)
