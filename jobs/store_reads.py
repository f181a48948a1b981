"""The jobs table (`jobs.models.Job`, `jobs_job`) read straight from a
persona's SQLite file: what the fleet console and the overview route show of
a persona's jobs, awake or asleep.

Plain `sqlite3` on a connection the caller opens (read-only:
console/persona_store.py), with no Django and no model: the waker reads a
sleeping persona's store without starting its worker, and has neither. The
models' selectors (jobs/selectors.py) are the worker's own reads, through
the ORM on its database thread; these are the same table's reads for a
reader outside the worker. So this module imports nothing but the standard
library, and any floor may import it (docs/design/LAYOUT.md, "Reads of a
store"); tests/test_store_reads.py runs every read here against a store the
current migrations made, so a column renamed in jobs/models.py fails there.
"""

from __future__ import annotations

import sqlite3
from typing import Any

# jobs.models.Job.State, in its order (tests/test_store_reads.py holds them equal).
JOB_STATES = ("queued", "running", "done", "interrupted", "cancelled", "timed_out")
# A cancelled job's status (core.api.STATUS_OF): somebody's choice, not a failure.
CANCELLED = 499
# What a job row shows: the console's table, the overview's `StoredJob`.
COLUMNS = "id, plugin, page_id, state, status, accepted_at, started_at, finished_at, schedule_id"
# Its error: a plugin's own in the result, else the runner's last one.
ERROR_LINE = "coalesce(json_extract(result, '$.error'), last_error)"
ERROR_CHARACTERS = 300


def live_counts(db: sqlite3.Connection) -> dict[str, int]:
    """The jobs running and queued now."""
    live = dict(db.execute("SELECT state, count(*) FROM jobs_job WHERE state IN ('running', 'queued') GROUP BY state"))
    return {"running": live.get("running", 0), "queued": live.get("queued", 0)}


def failed_since(db: sqlite3.Connection, since: float, limit: int) -> list[dict[str, Any]]:
    """The jobs still held that ended failed at or after `since`, newest
    first, at most `limit`: interrupted, timed out, or ended with a status
    of 400 or more other than a cancel's."""
    rows = db.execute(
        f"SELECT {COLUMNS}, {ERROR_LINE} AS error FROM jobs_job WHERE finished_at >= ? AND "
        f"(state IN ('interrupted', 'timed_out') OR (status >= 400 AND status != {CANCELLED})) "
        "ORDER BY finished_at DESC LIMIT ?",
        (since, limit),
    )
    return [job_row(row) for row in rows]


def queue_spans(db: sqlite3.Connection, since: float, now: float) -> list[tuple[float, float | None]]:
    """When each job queued before `now` and still queued at `since` or later
    entered the queue and left it (its start, or its end unstarted; None
    while it waits)."""
    rows = db.execute(
        "SELECT enqueued_at, coalesce(started_at, finished_at) FROM jobs_job "
        "WHERE enqueued_at IS NOT NULL AND enqueued_at < ? AND coalesce(started_at, finished_at, ?) >= ?",
        (now, now + 1, since),
    )
    return [(entered, left) for entered, left in rows]


def starts_since(db: sqlite3.Connection, since: float) -> list[tuple[float, float]]:
    """Each job started at or after `since`: when it started, and when it was accepted."""
    rows = db.execute("SELECT started_at, accepted_at FROM jobs_job WHERE started_at >= ?", (since,))
    return [(began, accepted) for began, accepted in rows]


def search(
    db: sqlite3.Connection,
    *,
    limit: int,
    job_id: str | None = None,
    plugin: str | None = None,
    state: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[dict[str, Any]]:
    """The jobs that match every part given, newest accepted first, at most
    `limit`; `since` and `until` bound the acceptance (until excluded)."""
    clauses, values = [], []
    for column, operator, value in (
        ("id", "=", job_id),
        ("plugin", "=", plugin),
        ("state", "=", state),
        ("accepted_at", ">=", since),
        ("accepted_at", "<", until),
    ):
        if value is not None:
            clauses.append(f"{column} {operator} ?")
            values.append(value)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = db.execute(
        f"SELECT {COLUMNS}, {ERROR_LINE} AS error FROM jobs_job {where} ORDER BY accepted_at DESC, id DESC LIMIT ?",
        (*values, limit),
    )
    return [job_row(row) for row in rows]


def job_row(row: sqlite3.Row) -> dict[str, Any]:
    """A row as the console shows it: its error cut to its first line."""
    found = dict(row)
    error = found.get("error")
    found["error"] = str(error).splitlines()[0][:ERROR_CHARACTERS] if error else None
    return found
