"""A worker's store, read from the test process through Django's ORM, read-only.

A test that must look at what a worker stored (a column the API never shows,
a row the API cannot tell apart from an expired one, or a worker that is
stopped) asks the models the worker itself writes with:

    store = WorkerStore(worker.store, django_db_blocker)
    assert not store.exists(Job.objects.filter(id=job_id))

The SQLite file is opened read-only (`mode=ro`), so a check can never change
what it checks, and closed after every read, so each read sees what the
worker had committed by then and holds no snapshot open across the test.

Not the `django_db` mark: pytest-django would treat the alias as a test
database of its own (created, flushed or rolled back around the test), and a
running worker's file is none of that. Database access is unblocked through
pytest-django's `django_db_blocker` instead, for the length of one read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet


class WorkerStore:
    def __init__(self, store: Path, blocker: Any) -> None:
        """`store` is the worker's PENELOPE_STORE (`WorkerProcess.store`);
        `blocker` is pytest-django's `django_db_blocker` fixture."""
        self.path = Path(store) / "penelope.db"
        self.alias = "worker-store-" + hashlib.sha256(str(self.path).encode()).hexdigest()[:12]
        self._blocker = blocker
        if self.alias not in connections.databases:
            connections.databases[self.alias] = {
                # The worker's own database settings, on its file, read-only.
                **connections.databases[DEFAULT_DB_ALIAS],
                "NAME": self.path.as_uri() + "?mode=ro",  # Django opens SQLite with uri=True
                "OPTIONS": {"timeout": 5},
            }

    @contextmanager
    def _open(self) -> Iterator[str]:
        with self._blocker.unblock():
            try:
                yield self.alias
            finally:
                connections[self.alias].close()

    def list(self, query: QuerySet) -> list:
        """The rows (models, or tuples of a `values_list`) `query` finds in the worker's store."""
        with self._open() as alias:
            return list(query.using(alias))

    def exists(self, query: QuerySet) -> bool:
        with self._open() as alias:
            return query.using(alias).exists()

    def count(self, query: QuerySet) -> int:
        with self._open() as alias:
            return query.using(alias).count()
