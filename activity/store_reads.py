"""The request log (`activity.models.RequestLogEntry`,
`activity_requestlogentry`) read straight from a persona's SQLite file: the
failures and the workload the fleet console and the overview route show,
awake or asleep.

Plain `sqlite3` on a connection the caller opens (read-only:
console/persona_store.py), with no Django and no model, for the waker,
which reads a sleeping persona's store without starting its worker. This
module imports nothing but the standard library, so any floor may import it
(docs/design/LAYOUT.md, "Reads of a store"); tests/test_store_reads.py runs
every read here against a store the current migrations made.

A failed job, in the log's words, is its end row (kind `job`) with a status
of 400 or more, other than a cancel's 499: a cancel is somebody's choice.
"""

from __future__ import annotations

import sqlite3

# A cancelled job's status (core.api.STATUS_OF), and a client's that hung up
# (activity/middleware.py, CLIENT_CLOSED): neither is a failure.
CANCELLED = 499
FAILED_JOB_ROW = f"kind = 'job' AND status >= 400 AND status != {CANCELLED}"
# The calls and jobs the console counts: the workload's `counted_as_work`
# (activity.models.RequestLogQuerySet) of the kinds `http` and `job` (a CDP
# connection's rows are not drawn): a job once, by its end row, not by the
# 202 that started it.
WORK_ROW = (
    "status IS NOT NULL AND kind IN ('http', 'job') AND NOT (kind = 'http' AND status = 202 AND route LIKE 'plugin/%')"
)


def failed_jobs_ended(db: sqlite3.Connection, *since: float) -> list[int]:
    """For each time in `since`: the jobs that ended failed at or after it.
    A job's end row is stamped with its start; it ended `duration_ms` later,
    so rows are looked at from an hour before the earliest."""
    ended = ", ".join("sum(ended >= ?)" for _ in since)
    found = db.execute(
        f"SELECT {ended} FROM (SELECT started_at + duration_ms / 1000.0 AS ended "
        f"FROM activity_requestlogentry WHERE started_at >= ? AND {FAILED_JOB_ROW})",
        (*since, min(since) - 3600.0),
    ).fetchone()
    return [number or 0 for number in found]


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
