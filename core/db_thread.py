"""The one path from the worker's event loop to the database: one long-lived
thread with one open SQLite connection.

Every ORM call of the worker process (requests, jobs, the deliverer, sweeps,
media, activity) runs here, and the management commands call the same
functions through the same bridge. Each call is one whole function, a
transaction at most, so the order of writes is the order of the calls.

Why one thread: Django's ASGI handler gives each request a thread of its own
for `sync_to_async` and closes that thread's connection when the request ends,
so ORM work inside a request would open a new SQLite connection each time
(connect, Django's SQL functions, the WAL and synchronous PRAGMAs); the
benchmark (`bench/`, docs/BENCHMARKS.md) found two thirds of a poll's database
time going to that. SQLite takes one writer at a time anyway, and each call
here is short (sweeps and recovery work in batches, files are unlinked after
the commit that drops their rows).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from django.db import DatabaseError, OperationalError, connection
from django.db.backends.signals import connection_created

# From the module, not the package: the package's ORM piece imports this module.
from core.seams.sqlite import run_sqlite_script

P = ParamSpec("P")
R = TypeVar("R")

THREAD_NAME = "penelope-db"
executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_NAME)

log = logging.getLogger("penelope.db")

# Rows one transaction of a sweep or a recovery handles: a few milliseconds
# of the write lock, so a job start never waits long behind one.
BATCH_ROWS = 100
BATCH_PAUSE_S = 0.005

# How long `persist` waits between tries: doubling from the first to the last.
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0


@functools.cache  # one wrapper per function: making one costs a good part of a small query
def on_db_thread(fn: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`fn` (sync, one transaction at most) as a coroutine function run on the database thread."""

    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DatabaseError:
            # The connection may be unusable now; the next call opens a new one.
            connection.close()
            raise

    @functools.wraps(fn)
    async def on_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        # The executor straight, with the caller's context: asgiref's
        # sync_to_async does the same with more steps around it, and this
        # bridge is on the path of every job start, end and poll.
        call = functools.partial(contextvars.copy_context().run, guarded, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(executor, call)

    return on_thread


def run_on_db_thread(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """For sync code before the event loop runs (the migrations at start)."""
    return executor.submit(fn, *args, **kwargs).result()


async def persist(fn: Callable[P, R], *args: P.args, what: str, **kwargs: P.kwargs) -> R:
    """Run `fn` on the database thread until it gets through, for as long as
    this process runs: for writes that must not be lost (a job's end, a
    webhook's outcome) while another process holds SQLite's write lock past
    the busy timeout. Only operational errors (locked, busy, I/O) are tried
    again; others (an integrity error, a bug) are raised, as trying again
    would not help."""
    delay = RETRY_FIRST_S
    tries = 0
    while True:
        try:
            return await on_db_thread(fn)(*args, **kwargs)
        except OperationalError as error:
            tries += 1
            if tries == 1 or tries % 20 == 0:
                log.warning("%s could not be stored yet (%s, try %d); trying again", what, error, tries)
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX_S)


def drain(step: Callable[..., int], *args: Any) -> int:
    """Call a batch step (one transaction of at most BATCH_ROWS rows, answering
    how many it handled) until a batch comes back short; answers the total.

    For a command beside a live worker: between batches it leaves the write
    lock free for a moment, as SQLite's busy handler is not fair and a worker
    waiting for the lock would otherwise sleep through the short gaps."""
    total = 0
    while True:
        handled = step(*args)
        total += handled
        if handled < BATCH_ROWS:
            return total
        time.sleep(BATCH_PAUSE_S)


async def adrain(step: Callable[..., int], *args: Any, full: int = BATCH_ROWS) -> int:
    """`drain` from the event loop: each batch is its own call on the database
    thread, so other database work (a job start, a poll) runs between them.
    A batch of `full` (BATCH_ROWS unless the step's batches are another size)
    means there may be more."""
    total = 0
    while True:
        handled = await on_db_thread(step)(*args)
        total += handled
        if handled < full:
            return total


# True while an admin page is served (core.auth.AdminOnly sets it; it
# follows the request into the thread where Django runs the admin's views).
admin_request: contextvars.ContextVar[bool] = contextvars.ContextVar("penelope_admin_request", default=False)


def watch_connections() -> None:
    """In the worker: log each database connection the process opens. There
    should be one, on the database thread, for the process's life, besides
    the admin's: its pages are Django's own sync views, on Django's request
    threads, and their connections are expected (INFO). One opened on any
    other thread is a path around the bridge, and says so at WARNING (the
    tests read these lines)."""

    def opened(sender, **kwargs) -> None:
        name = threading.current_thread().name
        if name.startswith(THREAD_NAME):
            log.info("database connection opened on the database thread")
        elif admin_request.get():
            log.info("database connection opened for an admin page, on Django's request thread %s (expected)", name)
        else:
            log.warning("database connection opened outside the database thread (on %s)", name)

    connection_created.connect(opened, weak=False)


def insert_statement(model: type, fields: list, connection: Any) -> str:
    """The one-row INSERT of `fields` (model fields, in order) into `model`'s
    table, with a `%s` placeholder each, as Django's compiler writes it."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"


def new_store_vacuums(sender: Any, connection: Any, **kwargs: Any) -> None:
    """`connection_created`: a store with no tables yet is given incremental
    auto-vacuum (in WAL mode SQLite takes the PRAGMA only through a VACUUM,
    which costs nothing on an empty file). Set once, the PRAGMA would rewrite
    the file's header on every connection, so an existing store is only
    read here, never written."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        empty = cursor.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    if empty and not connection.in_atomic_block:
        run_sqlite_script(connection, "PRAGMA auto_vacuum=INCREMENTAL; VACUUM;")


# Pages one step of `release_free_pages` gives back: 4 MiB of the file, a
# few milliseconds of the write lock.
VACUUM_PAGES = 1024


def release_free_pages() -> int:
    """One step of giving back the pages deletions left free, so a store's file
    shrinks after the sweeps (a store made with `auto_vacuum=INCREMENTAL`;
    on an older one this frees nothing): at most VACUUM_PAGES of them, then a
    checkpoint of the write-ahead log that waits for no one, which is when
    SQLite shortens the file and trims the log (`journal_size_limit`).
    Answers how many pages it gave back; `adrain` it. On the database thread."""
    with connection.cursor() as cursor:
        free = cursor.execute("PRAGMA freelist_count").fetchone()[0]
        if free and not connection.in_atomic_block:
            # A script: a cursor steps this PRAGMA once, which frees one page.
            run_sqlite_script(connection, f"PRAGMA incremental_vacuum({VACUUM_PAGES});")
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        return free - cursor.execute("PRAGMA freelist_count").fetchone()[0]
