"""What a persona's store says, read straight from its SQLite file: the
console's one reading of a worker's jobs, request log and schedules.

A read-only `sqlite3` connection, with no Django and no model: the waker has
neither, and it reads a sleeping persona's store without starting its worker
(SQLite's WAL lets a reader in beside a running worker too). The queries are
the apps' own, beside the models whose tables they read (jobs/store_reads.py,
activity/store_reads.py, schedules/store_reads.py, tested against a store
the current migrations made: tests/test_store_reads.py); this module opens
the file and puts their answers into the shapes the console draws. The
worker answers the same readings of its own store at `GET /api/v1/overview`
and `/api/v1/overview/jobs` (activity/overview.py), for a console that can
reach a persona only through its Service (Kubernetes, console/fleet_http.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activity import store_reads as log_reads
from jobs import store_reads as job_reads
from schedules import store_reads as schedule_reads

# The worker's database file in its store (penelope_site/settings.py).
DATABASE = "penelope.db"
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# The charts: the last hour by minute, the last day by hour.
SCALES = {"minute": (MINUTE, 60), "hour": (HOUR, 24)}
RECENT_FAILURES = 20
SEARCH_LIMIT = 100
MAX_SEARCH_LIMIT = 1000


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
            "failures": job_reads.failed_since(db, now - DAY, RECENT_FAILURES),
            "schedules": schedule_reads.listed(db),
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
    """The jobs running and queued now (the jobs table), and those that
    failed in the last hour and day (the request log keeps them longer)."""
    failed_hour, failed_day = log_reads.failed_jobs_ended(db, now - HOUR, now - DAY)
    return {**job_reads.live_counts(db), "failed_hour": failed_hour, "failed_day": failed_day}


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


def row_reading(store: Path, now: float) -> dict[str, Any]:
    """What the fleet page shows of a persona's store: its job counts, its
    next fire, and its requests (calls and jobs) per hour over the last day."""
    step, count = SCALES["hour"]
    start = bucket_start(now, step) - (count - 1) * step
    with opened(store) as db:
        if db is None:
            return {"jobs": empty_overview(now)["jobs"], "next_fire_at": None, "requests_by_hour": [0] * count}
        return {
            "jobs": job_counts(db, now),
            "next_fire_at": schedule_reads.next_fire(db),
            "requests_by_hour": log_reads.request_counts(db, start, step, count),
        }


def series(db: sqlite3.Connection, now: float, step: float, count: int) -> dict[str, Any]:
    """Calls and jobs by outcome, the queue's depth at each bucket's end, and
    the median wait of the jobs that started in each bucket: `count` buckets
    of `step` seconds, the last one holding `now`."""
    shaped = empty_series(now, step, count)
    start = shaped["start"]
    shaped.update(log_reads.outcome_counts(db, start, step, count))
    ends = [start + (index + 1) * step for index in range(count)]
    queued = job_reads.queue_spans(db, start, now)
    shaped["queue"] = [
        sum(1 for entered, left in queued if entered <= min(end, now) and (left is None or left > min(end, now)))
        for end in ends
    ]
    waits: list[list[float]] = [[] for _ in range(count)]
    for began, accepted in job_reads.starts_since(db, start):
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
        named = {
            "job_id": self.job_id,
            "plugin": self.plugin,
            "state": self.state,
            "since": self.since,
            "until": self.until,
        }
        return {name: str(value) for name, value in named.items() if value is not None} | {"limit": str(self.limit)}


def search_jobs(store: Path, search: JobSearch) -> list[dict[str, Any]]:
    """The store's jobs that match, newest first, at most `search.limit`."""
    with opened(store) as db:
        if db is None:
            return []
        return job_reads.search(
            db,
            limit=search.limit,
            job_id=search.job_id,
            plugin=search.plugin,
            state=search.state,
            since=search.since,
            until=search.until,
        )
