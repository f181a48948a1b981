"""One long-lived thread, with one open SQLite connection, for the database
work on the job hot paths (a job's start, its end, a poll).

Django's ASGI handler gives each request a thread of its own for
`sync_to_async` and closes that thread's connection when the request ends.
ORM work inside a request therefore opens a new SQLite connection each time
(connect, Django's SQL functions, the WAL and synchronous PRAGMAs), and a task
that outlives its request (a job's run) gets yet another new thread. The
benchmark (`bench/`, docs/BENCHMARKS.md) found two thirds of a poll's database
time going to that connection. Work sent here runs on one thread whose
connection stays open for the life of the process. SQLite takes one writer at
a time anyway and each call is one whole transaction; reads wait their turn
too, each a fraction of a millisecond.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection

P = ParamSpec("P")
R = TypeVar("R")

executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="penelope-db")


@functools.cache  # one wrapper per function: making one costs a good part of a small query
def on_db_thread(fn: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`fn` (sync, one transaction) as a coroutine function run on the database thread."""

    @functools.wraps(fn)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DatabaseError:
            # The connection may be unusable now; the next call opens a new one.
            connection.close()
            raise

    return sync_to_async(guarded, thread_sensitive=False, executor=executor)
