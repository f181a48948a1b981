"""What a persona's store says, read straight from its SQLite file: the
console's one reading of a worker's jobs, request log and schedules.

Plain `sqlite3` on a read-only connection, with no Django and no model: the
waker has neither, and it reads a sleeping persona's store without starting
its worker (SQLite's WAL lets a reader in beside a running worker too). The
worker answers the same readings of its own store at `GET /api/v1/overview`
and `/api/v1/overview/jobs`, for a console that can reach a persona only
through its Service (Kubernetes). The tables and columns named here are the
worker's (jobs.Job, activity.RequestLogEntry, schedules.Schedule);
tests/test_console.py and tests/test_console_services.py read real workers' stores, so a renamed
column fails there first.

A failed job is one that ended with a status of 400 or more, other than a
cancel's 499: a cancel is somebody's choice, not a failure.
"""

from __future__ import annotations

import contextlib
import sqlite3
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The worker's database file in its store (penelope_site/settings.py).
DATABASE = "penelope.db"
CANCELLED = 499
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# The charts: the last hour by minute, the last day by hour.
SCALES = {"minute": (MINUTE, 60), "hour": (HOUR, 24)}
RECENT_FAILURES = 20
SEARCH_LIMIT = 100
MAX_SEARCH_LIMIT = 1000
JOB_STATES = ("queued", "running", "done", "interrupted", "cancelled", "timed_out")
# A job that failed, in the request log's words: its end row's status.
FAILED_ROW = f"kind = 'job' AND status >= 400 AND status != {CANCELLED}"
# What the workload counts as work (activity.models.RequestLogQuerySet.counted_as_work).
WORK_ROW = "status IS NOT NULL AND kind IN ('http', 'job') AND NOT (kind = 'http' AND status = 202 AND route LIKE 'plugin/%')"
JOB_COLUMNS = "id, plugin, page_id, state, status, accepted_at, started_at, finished_at, schedule_id"
ERROR_LINE = "coalesce(json_extract(result, '$.error'), last_error)"


@contextlib.contextmanager
def opened(store: Path) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to the store's database, or None when there is
    none yet (a persona whose worker never ran)."""
    path = Path(store) / DATABASE
    if not path.exists():
        yield None
        return
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    connection.row_factory = sqlite3.Row
    try:
        yield connection
    finally:
        connection.close()


def overview(store: Path, now: float) -> dict[str, Any]:
    """The persona's jobs, failures, schedules and workload series as of `now`."""
    with opened(store) as db:
        if db is None:
            return empty_overview(now)
        return {
            "read_at": round(now, 3),
            "jobs": job_counts(db, now),
            "failures": recent_failures(db, now),
            "schedules": schedules(db),
            "series": {scale: series(db, now, step, count) for scale, (step, count) in SCALES.items()},
        }


def empty_overview(now: float) -> dict[str, Any]:
    return {
        "read_at": round(now, 3),
        "jobs": {"running": 0, "queued": 0, "failed_hour": 0, "failed_day": 0},
        "failures": [],
        "schedules": [],
        "series": {scale: empty_series(now, step, count) for scale, (step, count) in SCALES.items()},
    }


def job_counts(db: sqlite3.Connection, now: float) -> dict[str, int]:
    live = dict(db.execute("SELECT state, count(*) FROM jobs_job WHERE state IN ('running', 'queued') GROUP BY state"))
    # A job's end row is stamped with its start; it ended `duration_ms` later.
    failed = db.execute(
        f"SELECT sum(ended >= ?), sum(ended >= ?) FROM (SELECT started_at + duration_ms / 1000.0 AS ended "
        f"FROM activity_requestlogentry WHERE started_at >= ? AND {FAILED_ROW})",
        (now - HOUR, now - DAY, now - DAY - HOUR),
    ).fetchone()
    return {
        "running": live.get("running", 0),
        "queued": live.get("queued", 0),
        "failed_hour": failed[0] or 0,
        "failed_day": failed[1] or 0,
    }


def recent_failures(db: sqlite3.Connection, now: float) -> list[dict[str, Any]]:
    """The last day's failed jobs still held, newest first, with their error line."""
    rows = db.execute(
        f"SELECT {JOB_COLUMNS}, {ERROR_LINE} AS error FROM jobs_job WHERE finished_at >= ? AND "
        f"(state IN ('interrupted', 'timed_out') OR (status >= 400 AND status != {CANCELLED})) "
        "ORDER BY finished_at DESC LIMIT ?",
        (now - DAY, RECENT_FAILURES),
    )
    return [job_row(row) for row in rows]


def schedules(db: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = db.execute(
        "SELECT id, name, cron, timezone, page_id, plugin, paused, next_fire_at, last_fired_at, last_error "
        "FROM schedules_schedule ORDER BY paused, next_fire_at IS NULL, next_fire_at, name"
    )
    return [{**dict(row), "paused": bool(row["paused"])} for row in rows]


def empty_series(now: float, step: float, count: int) -> dict[str, Any]:
    start = bucket_start(now, step) - (count - 1) * step
    zeros = [0] * count
    return {
        "start": start,
        "step": step,
        "calls_ok": zeros,
        "calls_failed": zeros,
        "jobs_ok": zeros,
        "jobs_failed": zeros,
        "queue": zeros,
        "wait_p50_s": [None] * count,
    }


def bucket_start(now: float, step: float) -> float:
    return now - now % step


def outcome_counts(db: sqlite3.Connection, start: float, step: float, count: int) -> dict[str, list[int]]:
    """Calls and jobs by outcome in `count` buckets of `step` seconds from `start`."""
    counts = {name: [0] * count for name in ("calls_ok", "calls_failed", "jobs_ok", "jobs_failed")}
    for bucket, kind, failed, number in db.execute(
        f"SELECT CAST((started_at - ?) / ? AS INTEGER), kind, status >= 400 AND status != {CANCELLED}, count(*) "
        f"FROM activity_requestlogentry WHERE started_at >= ? AND {WORK_ROW} GROUP BY 1, 2, 3",
        (start, step, start),
    ):
        if 0 <= bucket < count:
            counts[f"{'jobs' if kind == 'job' else 'calls'}_{'failed' if failed else 'ok'}"][bucket] += number
    return counts


def request_counts(db: sqlite3.Connection, start: float, step: float, count: int) -> list[int]:
    """Calls and jobs, whatever their outcome, in `count` buckets of `step`
    seconds from `start`: `outcome_counts` summed, in one key of grouping
    instead of three. The fleet page reads this for every persona at every
    refresh; the three keys cost it a third more time (bench/phases/console.py)."""
    totals = [0] * count
    for bucket, number in db.execute(
        f"SELECT CAST((started_at - ?) / ? AS INTEGER), count(*) FROM activity_requestlogentry "
        f"WHERE started_at >= ? AND {WORK_ROW} GROUP BY 1",
        (start, step, start),
    ):
        if 0 <= bucket < count:
            totals[bucket] += number
    return totals


def row_reading(store: Path, now: float) -> dict[str, Any]:
    """What the fleet page shows of a persona's store: its job counts, its
    next fire, and its requests (calls and jobs) per hour over the last day."""
    step, count = SCALES["hour"]
    start = bucket_start(now, step) - (count - 1) * step
    with opened(store) as db:
        if db is None:
            return {"jobs": empty_overview(now)["jobs"], "next_fire_at": None, "requests_by_hour": [0] * count}
        (next_fire,) = db.execute("SELECT min(next_fire_at) FROM schedules_schedule WHERE NOT paused").fetchone()
        return {
            "jobs": job_counts(db, now),
            "next_fire_at": next_fire,
            "requests_by_hour": request_counts(db, start, step, count),
        }


def series(db: sqlite3.Connection, now: float, step: float, count: int) -> dict[str, Any]:
    """Calls and jobs by outcome, the queue's depth at each bucket's end, and
    the median wait of the jobs that started in each bucket: `count` buckets
    of `step` seconds, the last one holding `now`."""
    shaped = empty_series(now, step, count)
    start = shaped["start"]
    shaped.update(outcome_counts(db, start, step, count))
    ends = [start + (index + 1) * step for index in range(count)]
    queued = db.execute(
        "SELECT enqueued_at, coalesce(started_at, finished_at) FROM jobs_job "
        "WHERE enqueued_at IS NOT NULL AND enqueued_at < ? AND coalesce(started_at, finished_at, ?) >= ?",
        (now, now + 1, start),
    ).fetchall()
    shaped["queue"] = [
        sum(1 for entered, left in queued if entered <= min(end, now) and (left is None or left > min(end, now)))
        for end in ends
    ]
    waits: list[list[float]] = [[] for _ in range(count)]
    for began, accepted in db.execute(
        "SELECT started_at, accepted_at FROM jobs_job WHERE started_at >= ?", (start,)
    ):
        bucket = int((began - start) // step)
        if 0 <= bucket < count:
            waits[bucket].append(max(0.0, began - accepted))
    shaped["wait_p50_s"] = [round(statistics.median(each), 3) if each else None for each in waits]
    return shaped


@dataclass(frozen=True)
class JobSearch:
    """A search of the jobs: each part optional; times are epoch seconds of acceptance."""

    job_id: str | None = None
    plugin: str | None = None
    state: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = SEARCH_LIMIT

    def as_query(self) -> dict[str, str]:
        """The search as query parameters (the worker's /api/v1/overview/jobs)."""
        named = {"job_id": self.job_id, "plugin": self.plugin, "state": self.state, "since": self.since, "until": self.until}
        return {name: str(value) for name, value in named.items() if value is not None} | {"limit": str(self.limit)}


def search_jobs(store: Path, search: JobSearch) -> list[dict[str, Any]]:
    """The store's jobs that match, newest first, at most `search.limit`."""
    clauses, values = [], []
    for column, operator, value in (
        ("id", "=", search.job_id),
        ("plugin", "=", search.plugin),
        ("state", "=", search.state),
        ("accepted_at", ">=", search.since),
        ("accepted_at", "<", search.until),
    ):
        if value is not None:
            clauses.append(f"{column} {operator} ?")
            values.append(value)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    with opened(store) as db:
        if db is None:
            return []
        rows = db.execute(
            f"SELECT {JOB_COLUMNS}, {ERROR_LINE} AS error FROM jobs_job {where} "
            "ORDER BY accepted_at DESC, id DESC LIMIT ?",
            (*values, search.limit),
        )
        return [job_row(row) for row in rows]


def job_row(row: sqlite3.Row) -> dict[str, Any]:
    found = dict(row)
    error = found.get("error")
    found["error"] = str(error).splitlines()[0][:300] if error else None
    return found
