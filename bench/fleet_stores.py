"""Persona stores as a busy day leaves them, for the console's benchmark
(bench/phases/console.py): a day of jobs, the request log's rows for them and
for plain calls beside them, and a couple of schedules.

The schema is the worker's own: `manage.py migrate` runs once into a template
store, whose database file is then copied into each persona's store and
filled with plain sqlite3 (one transaction, `executemany`), as the worker's
rows would read: a job's 202, its start row (no status) and its end row (the
status the plain call would have answered, stamped with the start), a poll
of each polled job, and some plain calls. No worker ever runs on these stores.

The jobs are kept for the day (a `ttl` of a day, as with `MAX_TTL_S=86400`);
with the default 600 s a store would hold ten minutes of them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "penelope.db"  # the worker's database file in its store (penelope_site/settings.py)
DAY = 86400.0
PAGES = ("main", "second", "third")
# (plugin, share of the jobs); the searches name the first.
PLUGINS = (("demo/get-following", 0.5), ("demo/open-account", 0.3), ("web/evaluate", 0.15), ("web/download", 0.05))
QUEUED, RUNNING = 5, 2  # jobs not ended, the newest of each store
# The ended jobs' outcomes: (state, status, share, error line).
OUTCOMES = (
    ("done", 200, 0.930, None),
    ("done", 500, 0.030, "plugin failed: the page has no element #followers"),
    ("done", 502, 0.010, "the browser step failed: the tab was lost"),
    ("done", 408, 0.005, "the action timed out after 30 s"),
    ("cancelled", 499, 0.010, "job cancelled"),
    ("interrupted", 503, 0.005, "job interrupted: the worker stopped before it ended"),
    ("timed_out", 409, 0.010, "no page came free within the queue's timeout"),
)
PLAIN_CALLS = 5_000  # plugin calls answered in the request itself
SCHEDULES = 2


@dataclass(frozen=True)
class Filled:
    jobs: int
    log_rows: int
    job_ids: list[str]  # a sample, for the searches by id


def template_store(folder: Path) -> Path:
    """A store with the worker's schema and nothing in it: its migrations,
    run by `manage.py migrate` as `serve` runs them. Answers its database."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, check=True, timeout=300,
        env={**os.environ, "PENELOPE_STORE": str(folder), "PENELOPE_LOG_LEVEL": "WARNING"},
    )
    database = folder / DATABASE
    if Path(f"{database}-wal").exists() and Path(f"{database}-wal").stat().st_size:
        raise RuntimeError("the template's write-ahead log was left unmerged; copying the file alone would lose it")
    return database


def make_store(template: Path, store: Path, *, jobs: int, now: float, seed: int) -> Filled:
    store.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copyfile(template, store / DATABASE)
    return fill(store / DATABASE, jobs=jobs, now=now, rng=random.Random(seed))


def fill(database: Path, *, jobs: int, now: float, rng: random.Random) -> Filled:
    job_rows, log_rows = [], []
    schedule_ids = [f"{rng.getrandbits(64):016x}" for _ in range(SCHEDULES)]
    accepted = sorted(now - DAY * rng.random() for _ in range(jobs - QUEUED - RUNNING))
    plugins, weights = zip(*PLUGINS, strict=True)
    for n, accepted_at in enumerate([*accepted, *sorted(now - 60 * rng.random() for _ in range(QUEUED + RUNNING))]):
        job_id = f"{rng.getrandbits(64):016x}"
        plugin = rng.choices(plugins, weights)[0]
        page = rng.choice(PAGES)
        polled = rng.random() < 0.7
        schedule_id = rng.choice(schedule_ids) if rng.random() < 0.1 else None  # a fire's job: no 202
        waited = rng.expovariate(1 / 0.5) if rng.random() < 0.3 else 0.0  # some waited in their page's line
        ran_s = rng.uniform(0.2, 8.0)
        if n >= jobs - QUEUED - RUNNING:  # the newest: still in line, or on their page
            state = "running" if n >= jobs - RUNNING else "queued"
            status, error, finished_at = None, None, None
            started_at = accepted_at + waited if state == "running" else None
        else:
            state, status, _, error = rng.choices(OUTCOMES, [each[2] for each in OUTCOMES])[0]
            started_at = None if state == "timed_out" else accepted_at + waited
            finished_at = started_at + ran_s if started_at is not None else accepted_at + 30
            if finished_at > now:  # accepted in the last seconds: still on its page
                state, status, error, finished_at = "running", None, None, None
                started_at = started_at or accepted_at
        queued_first = waited > 0 or state in ("queued", "timed_out")
        result = None
        if status is not None:
            result = json.dumps({"success": True, "page_id": page, "value": {"count": 42}} if status < 400
                                else {"success": False, "error": error, "page_id": page})
        ttl = DAY
        job_rows.append((
            job_id, page, plugin, json.dumps({"handle": f"user{n % 500}", "limit": 100}), state,
            "poll" if polled else "webhook", ttl, None if polled else "https://hooks.example/penelope",
            started_at, finished_at, finished_at + ttl if finished_at else None, status, result, "[]",
            0 if polled or finished_at is None else 1, -1 if polled or finished_at is None else 0,
            None, accepted_at if queued_first else None, accepted_at, started_at,
            schedule_id,
        ))
        route, path = f"plugin/{plugin}", f"/api/v1/{page}/plugin/{plugin}"
        if schedule_id is None:
            log_rows.append((accepted_at - 0.002, "http", "POST", route, path, page, 202, 2.1, None))
        if started_at is not None:
            log_rows.append((started_at, "job", "JOB", route, path, page, None, 0.0, job_id))
            if finished_at is not None:
                log_rows.append((started_at, "job", "JOB", route, path, page, status,
                                 (finished_at - started_at) * 1000, job_id))
        elif finished_at is not None:  # a queue's timeout: its end row, and no start
            log_rows.append((accepted_at, "job", "JOB", route, path, page, status, 0.0, job_id))
        if polled and finished_at is not None:
            log_rows.append((finished_at - 0.5, "http", "GET", "jobs/{job_id}", f"/api/v1/jobs/{job_id}", None,
                             200, 480.0, None))
    for _ in range(PLAIN_CALLS):
        plugin = rng.choices(plugins, weights)[0]
        page = rng.choice(PAGES)
        status = 200 if rng.random() < 0.96 else rng.choice((404, 500, 502))
        log_rows.append((now - DAY * rng.random(), "http", "POST", f"plugin/{plugin}", f"/api/v1/{page}/plugin/{plugin}",
                         page, status, rng.uniform(50, 3000), None))
    log_rows.sort(key=lambda row: row[0])
    db = sqlite3.connect(database)
    try:
        with db:
            db.executemany(
                "INSERT INTO jobs_job (id, page_id, plugin, params, state, mode, ttl, callback, started_at, "
                "finished_at, expires_at, status, result, media_tokens, attempts, last_slot, last_error, enqueued_at, "
                "accepted_at, attempt_started_at, schedule_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?, ?)",
                job_rows,
            )
            db.executemany(
                "INSERT INTO activity_requestlogentry (started_at, kind, method, route, path, page_id, status, "
                "duration_ms, job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                log_rows,
            )
            db.executemany(
                "INSERT INTO schedules_schedule (id, name, cron, timezone, page_id, plugin, params, priority, retry, "
                "retry_backoff, overlap, catchup_s, paused, next_fire_at, last_fired_at, last_job_id, fired, skipped, "
                "missed, refused, created_at, updated_at) VALUES (?, ?, ?, 'UTC', 'any', ?, '{}', 0, 0, 5.0, 'skip', "
                "0.0, ?, ?, ?, NULL, ?, 0, 0, 0, ?, ?)",
                [
                    # Hours away, so no schedule asks the waker to wake its worker (WAKE_LEAD_S);
                    # `next-wake-at` is not written either: these stores' workers stay asleep.
                    (schedule_id, f"nightly-{index}", f"0 {2 + index} * * *", PLUGINS[index][0], index == 1,
                     None if index == 1 else now + 6 * 3600 + index * 60, now - 18 * 3600, 24 * (index + 1),
                     now - 30 * DAY, now - DAY)
                    for index, schedule_id in enumerate(schedule_ids)
                ],
            )
    finally:
        db.close()
    return Filled(jobs=len(job_rows), log_rows=len(log_rows), job_ids=[row[0] for row in job_rows[:: max(1, jobs // 50)]])
