"""Every read the console and the overview route make of a persona's store
(jobs/, activity/ and schedules/ `store_reads.py`, and their composition in
console/persona_store.py), run against a store the current migrations made.

The reads are plain SQL on plain sqlite3, so nothing but a run against the
real schema tells a column renamed in a model from one the SQL still names.
Here the store is made as `serve` makes a worker's: `manage.py migrate`
with PENELOPE_STORE pointing at it. Its rows are written through the models
(on a database alias of the test's own, with the worker's settings, on that
file); each read then runs on a read-only connection,
as the console opens a sleeping persona's store, and what it answers is
checked row by row, and where the models say the same thing (a job's
states, the live jobs, the workload's counting, the next fire) against the
ORM on the same rows.
"""

from __future__ import annotations

import inspect
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Min

from activity import store_reads as log_reads
from activity.models import RequestLogEntry
from console import persona_store
from console.persona_store import JobSearch
from core import errors
from core.api import STATUS_OF
from harness.worker import ROOT
from jobs import store_reads as job_reads
from jobs.models import Job
from schedules import store_reads as schedule_reads
from schedules.models import Schedule

ALIAS = "store-reads"
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# Half past an hour and a half-minute: no row sits on a bucket's edge.
NOW = 1_796_544_000.0 + 1830.0

# Every read each module holds, by the test that runs it: a read added
# without a test here fails `test_every_read_is_run_here`.
READS = {
    job_reads: {"live_counts", "failed_since", "queue_spans", "starts_since", "search", "job_row"},
    log_reads: {"failed_jobs_ended", "outcome_counts", "request_counts"},
    schedule_reads: {"listed", "next_fire"},
}


def job(job_id: str, state: str, accepted: float, **fields) -> Job:
    return Job(
        **{"page_id": "main", "plugin": "web/title", "mode": "poll", **fields},
        id=job_id,
        state=state,
        accepted_at=NOW - accepted,
    )


def logged(
    kind: str, started: float, status: int | None, route: str = "main/title", duration_ms: float = 10.0
) -> RequestLogEntry:
    return RequestLogEntry(
        kind=kind,
        method="POST",
        route=route,
        path=f"/api/v1/{route}",
        status=status,
        started_at=NOW - started,
        duration_ms=duration_ms,
    )


def schedule(schedule_id: str, name: str, **fields) -> Schedule:
    return Schedule(
        **{"cron": "0 3 * * *", "page_id": "main", "plugin": "web/title", **fields},
        id=schedule_id,
        name=name,
        created_at=NOW - DAY,
        updated_at=NOW - DAY,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory, django_db_blocker) -> Iterator[Path]:
    """A store directory whose penelope.db the current migrations made,
    with the rows below written through the models."""
    store = tmp_path_factory.mktemp("store")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        check=True,
        timeout=300,
        env={**os.environ, "PENELOPE_STORE": str(store), "PENELOPE_LOG_LEVEL": "WARNING"},
    )
    connections.databases[ALIAS] = {**connections.databases[DEFAULT_DB_ALIAS], "NAME": store / persona_store.DATABASE}
    try:
        with django_db_blocker.unblock():
            Job.objects.using(ALIAS).bulk_create(
                [
                    job("running1", "running", 100, enqueued_at=NOW - 100, started_at=NOW - 90),
                    job("queued1", "queued", 50, enqueued_at=NOW - 50),
                    job("queued2", "queued", 40, enqueued_at=NOW - 40, plugin="demo/sleep"),
                    # Failed: a plugin's error (its first line shown), and a timeout with the runner's.
                    job(
                        "failed1",
                        "done",
                        700,
                        enqueued_at=NOW - 700,
                        started_at=NOW - 650,
                        finished_at=NOW - 600,
                        status=500,
                        result={"error": "boom\nthe trace"},
                        last_error="not this one",
                    ),
                    job(
                        "timeout1",
                        "timed_out",
                        400,
                        started_at=NOW - 390,
                        finished_at=NOW - 300,
                        status=504,
                        last_error="x" * 400,
                    ),
                    # Not failures: a cancel, a success, and a failure of two days ago.
                    job("cancel1", "cancelled", 250, started_at=NOW - 240, finished_at=NOW - 200, status=499),
                    job(
                        "ok1", "done", 150, started_at=NOW - 130, finished_at=NOW - 100, status=200, schedule_id="sch1"
                    ),
                    job(
                        "old1",
                        "done",
                        2 * DAY + 100,
                        started_at=NOW - 2 * DAY - 90,
                        finished_at=NOW - 2 * DAY,
                        status=500,
                    ),
                ]
            )
            RequestLogEntry.objects.using(ALIAS).bulk_create(
                [
                    logged("job", 650, 500, duration_ms=50_000.0),  # ended 600 s ago: failed, this hour
                    logged("job", 5 * HOUR, 504),  # failed, this day
                    logged("job", 200, 499),  # a cancel
                    logged("job", 100, 200),
                    logged("http", 650, 202, route="plugin/web/title"),  # a job's start: not work (its end row is)
                    logged("http", 90, 200),
                    logged("http", 30, 404),
                    logged("http", 20, None),  # still in flight: not counted
                    logged("browser", 80, 200, route="browser/relaunch/crash"),
                    logged("cdp", 70, 200, route="cdp/open"),
                ]
            )
            Schedule.objects.using(ALIAS).bulk_create(
                [
                    schedule("sch1", "later", next_fire_at=NOW + 600),
                    schedule(
                        "sch2",
                        "sooner",
                        cron="*/5 * * * *",
                        page_id="any",
                        next_fire_at=NOW + 60,
                        last_fired_at=NOW - 240,
                        last_error="it was refused",
                    ),
                    schedule("sch3", "held", next_fire_at=NOW + 5, paused=True),
                    schedule("sch4", "unset"),
                ]
            )
        yield store
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]  # the wrapper keeps its settings: a store made again must get a new one
        del connections.databases[ALIAS]


@pytest.fixture
def db(store) -> Iterator[sqlite3.Connection]:
    """The store opened as the console opens it: read-only, rows by name."""
    with persona_store.opened(store) as connection:
        assert connection is not None
        yield connection


@pytest.fixture
def orm(django_db_blocker) -> Iterator[str]:
    """The models on the same store, for what they say the same about."""
    with django_db_blocker.unblock():
        yield ALIAS


def test_every_read_is_run_here():
    for module, names in READS.items():
        defined = {
            name
            for name, found in inspect.getmembers(module, inspect.isfunction)
            if found.__module__ == module.__name__
        }
        assert defined == names, f"{module.__name__}: a read without its test here, or a test of a read gone"


def test_the_words_the_reads_share_with_the_models(orm):
    assert job_reads.JOB_STATES == tuple(Job.State.values)
    assert job_reads.CANCELLED == log_reads.CANCELLED == STATUS_OF[errors.Cancelled]


def test_the_live_jobs(db, orm):
    assert job_reads.live_counts(db) == {"running": 1, "queued": 2}
    live = Job.objects.using(orm).filter(state__in=Job.LIVE_STATES)
    assert job_reads.live_counts(db) == {state: live.filter(state=state).count() for state in ("running", "queued")}


def test_the_failed_jobs_newest_first_with_their_first_error_line(db):
    failed = job_reads.failed_since(db, NOW - DAY, 20)
    assert [row["id"] for row in failed] == ["timeout1", "failed1"]
    assert failed[0]["error"] == "x" * 300  # cut to 300 characters
    assert failed[1] == {
        "id": "failed1",
        "plugin": "web/title",
        "page_id": "main",
        "state": "done",
        "status": 500,
        "accepted_at": NOW - 700,
        "started_at": NOW - 650,
        "finished_at": NOW - 600,
        "schedule_id": None,
        "error": "boom",
    }
    assert [row["id"] for row in job_reads.failed_since(db, NOW - DAY, 1)] == ["timeout1"]
    assert [row["id"] for row in job_reads.failed_since(db, NOW - 3 * DAY, 20)] == ["timeout1", "failed1", "old1"]


def test_the_queue_and_the_waits(db):
    spans = sorted(job_reads.queue_spans(db, NOW - HOUR, NOW))
    assert spans == [(NOW - 700, NOW - 650), (NOW - 100, NOW - 90), (NOW - 50, None), (NOW - 40, None)]
    assert sorted(job_reads.queue_spans(db, NOW - 60, NOW)) == [(NOW - 50, None), (NOW - 40, None)]
    starts = sorted(job_reads.starts_since(db, NOW - HOUR))
    assert starts == sorted(
        [
            (NOW - 90, NOW - 100),
            (NOW - 650, NOW - 700),
            (NOW - 390, NOW - 400),
            (NOW - 240, NOW - 250),
            (NOW - 130, NOW - 150),
        ]
    )


def test_the_search_of_the_jobs(db):
    def ids(**parts) -> list[str]:
        return [row["id"] for row in job_reads.search(db, limit=parts.pop("limit", 100), **parts)]

    everyone = ["queued2", "queued1", "running1", "ok1", "cancel1", "timeout1", "failed1", "old1"]
    assert ids() == everyone
    assert ids(limit=2) == everyone[:2]
    assert ids(job_id="ok1") == ["ok1"]
    assert ids(plugin="demo/sleep") == ["queued2"]
    assert ids(state="queued") == ["queued2", "queued1"]
    assert ids(since=NOW - 250, until=NOW - 50) == ["running1", "ok1", "cancel1"]  # until excluded
    assert job_reads.search(db, limit=1, job_id="ok1")[0]["schedule_id"] == "sch1"


def test_a_job_row_keeps_its_error_s_first_line(db):
    row = db.execute("SELECT 'a' AS id, 'first\nsecond' AS error").fetchone()
    assert job_reads.job_row(row) == {"id": "a", "error": "first"}
    assert job_reads.job_row(db.execute("SELECT 'a' AS id, NULL AS error").fetchone())["error"] is None


def test_the_failed_jobs_in_the_request_log(db):
    assert log_reads.failed_jobs_ended(db, NOW - HOUR, NOW - DAY) == [1, 2]
    assert log_reads.failed_jobs_ended(db, NOW - 599) == [0]  # the first ended 600 s ago, not when it started


def test_the_workload_by_bucket(db, orm):
    start, step, count = NOW - 30 - 9 * MINUTE, MINUTE, 10  # ten minutes, the last holding NOW
    assert log_reads.outcome_counts(db, start, step, count) == {
        "calls_ok": [0] * 8 + [1, 0],
        "calls_failed": [0] * 9 + [1],
        "jobs_ok": [0] * 6 + [1, 1, 0, 0],  # the cancel, 200 s ago, and the job done 100 s ago
        "jobs_failed": [0] * 10,
    }
    assert log_reads.request_counts(db, start, step, count) == [0] * 6 + [1, 1, 1, 1]
    # The day: the same rows as the workload counts them (of the kinds drawn).
    day_start = NOW - 30 * HOUR
    assert sum(log_reads.request_counts(db, day_start, HOUR, 31)) == 6
    work = RequestLogEntry.objects.using(orm).counted_as_work().filter(kind__in=("http", "job"))
    assert sum(log_reads.request_counts(db, day_start, HOUR, 31)) == work.count()
    by_outcome = log_reads.outcome_counts(db, day_start, HOUR, 31)
    assert {name: sum(values) for name, values in by_outcome.items()} == {
        "calls_ok": 1,
        "calls_failed": 1,
        "jobs_ok": 2,
        "jobs_failed": 2,  # the cancel is no failure
    }


def test_the_schedules(db, orm):
    listed = schedule_reads.listed(db)
    assert [row["name"] for row in listed] == ["sooner", "later", "unset", "held"]
    assert listed[0] == {
        "id": "sch2",
        "name": "sooner",
        "cron": "*/5 * * * *",
        "timezone": "UTC",
        "page_id": "any",
        "plugin": "web/title",
        "paused": False,
        "next_fire_at": NOW + 60,
        "last_fired_at": NOW - 240,
        "last_error": "it was refused",
    }
    assert listed[-1]["paused"] is True
    assert schedule_reads.next_fire(db) == NOW + 60
    expected = Schedule.objects.using(orm).filter(paused=False).aggregate(first=Min("next_fire_at"))["first"]
    assert schedule_reads.next_fire(db) == expected


def test_the_console_s_readings_of_the_store(store):
    """console/persona_store.py puts the reads together: the overview, the
    fleet row and the search, as the console and GET /api/v1/overview answer them."""
    overview = persona_store.overview(store, NOW)
    assert overview["jobs"] == {"running": 1, "queued": 2, "failed_hour": 1, "failed_day": 2}
    assert [row["id"] for row in overview["failures"]] == ["timeout1", "failed1"]
    assert [row["name"] for row in overview["schedules"]] == ["sooner", "later", "unset", "held"]
    minutes = overview["series"]["minute"]
    assert minutes["calls_ok"][-2:] == [1, 0] and minutes["calls_failed"][-1] == 1
    assert minutes["queue"][-1] == 2  # queued1 and queued2 wait now
    assert minutes["wait_p50_s"][-2] == 10.0  # running1: accepted 100 s ago, started 90 s ago
    row = persona_store.row_reading(store, NOW)
    assert row["jobs"] == overview["jobs"] and row["next_fire_at"] == NOW + 60
    assert sum(row["requests_by_hour"]) == 6
    found = persona_store.search_jobs(store, JobSearch(state="queued", limit=1))
    assert [each["id"] for each in found] == ["queued2"]
    # A persona whose worker never ran has no store file: nothing, read as such.
    empty = store.parent / "never-ran"
    assert persona_store.overview(empty, NOW) == persona_store.empty_overview(NOW)
    assert persona_store.search_jobs(empty, JobSearch()) == []
