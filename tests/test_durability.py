"""A job's life when the database does not answer in time: another process
holds SQLite's write lock past the worker's busy timeout, a deliverer dies
mid-send, a sweep deletes ten thousand jobs. Real workers, real deliverers and
real SQLite files; the lock is taken from this process with `BEGIN IMMEDIATE`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from activity.models import RequestLogEntry
from core import store_lock
from harness.receiver import Received, Receiver
from harness.worker import ROOT, WorkerProcess, wait_until
from jobs.models import DeliveryAttempt, Job
from media_store.models import MediaFile
from tests.support.worker_store import WorkerStore
from tests.test_jobs import ended, page_idle, started

# The worker gives up on a locked database quickly here, so every lock this
# file holds outlasts many busy timeouts.
BUSY_S = "0.3"
NEVER_RETRIED = "Task exception was never retrieved"


@contextmanager
def write_lock(store: Path) -> Iterator[sqlite3.Connection]:
    """Hold the store's write lock, as an operator's long command or a backup would."""
    db = sqlite3.connect(store / "penelope.db", isolation_level=None, timeout=30, check_same_thread=False)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    finally:
        db.execute("COMMIT")
        db.close()


def command_env(worker: WorkerProcess, **extra: str) -> dict[str, str]:
    return {
        **os.environ, "PENELOPE_STORE": str(worker.store), "PENELOPE_KEY": worker.key, "PYTHONUNBUFFERED": "1",
        **worker.env, **extra,
    }


def start_command(worker: WorkerProcess, *args: str, log: Path, **extra: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=command_env(worker, **extra),
            stdout=out, stderr=subprocess.STDOUT,
        )


def activity(api) -> dict:
    return api.get("/activity").json()


# --- a job's end is never lost ------------------------------------------------------------


def test_a_job_that_ends_under_a_locked_database_keeps_its_result(make_worker):
    worker = make_worker(env={"DB_BUSY_TIMEOUT_S": BUSY_S})
    with worker.client() as api:
        job_id = started(api, "testing/sleep", {"seconds": 0.5, "tag": "kept"}, ttl=60)
        with write_lock(worker.store):
            # The plugin returns and frees its page; storing its end fails
            # again and again behind the lock, and the job still shows as running.
            page_idle(api)
            wait_until(lambda: "job " + job_id + "'s end could not be stored yet" in worker.log(), what="a failed store")
            assert api.get(f"/jobs/{job_id}").json()["state"] == "running"
            assert activity(api)["jobs_in_flight"] == 1
        done = ended(api, job_id, timeout=10)
        assert done["state"] == "done" and done["status"] == 200 and done["result"]["tag"] == "kept"
        assert activity(api)["jobs_in_flight"] == 0
    assert NEVER_RETRIED not in worker.log()


REFUSE_SUCCESSFUL_ENDS = """
CREATE TRIGGER refuse_successful_ends BEFORE UPDATE OF state ON jobs_job
WHEN NEW.state = 'done' AND NEW.status = 200
BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
"""


def test_a_job_whose_end_the_database_refuses_ends_500_saying_why_and_is_delivered(make_worker):
    # Not a locked database (tried again until it passes) but an error trying
    # again cannot mend: a constraint, as a value too large for SQLite is.
    worker = make_worker(env={"WEBHOOK_ATTEMPTS_S": "0,0.5"})
    with sqlite3.connect(worker.store / "penelope.db") as db:
        db.execute(REFUSE_SUCCESSFUL_ENDS)
    refused = "The job's answer could not be stored (IntegrityError: refused by the test); the details are in the worker's log."
    with Receiver() as receiver, worker.client() as api:
        polled = started(api, "testing/sleep", {"seconds": 0, "tag": "lost"}, ttl=60)
        done = api.get(f"/jobs/{polled}", params={"wait": 30}).json()  # the long-poll wakes at the end
        assert (done["state"], done["status"]) == ("done", 500)
        assert done["result"] == {"success": False, "error": refused, "page_id": "main"}
        assert activity(api)["jobs_in_flight"] == 0

        hooked = api.post(
            "/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Callback-Url": receiver.url + "/200/refused"}
        ).json()["job_id"]
        hit = wait_until(lambda: receiver.received("/200/refused"), what="the webhook of the refused end")[0]
        assert hit.headers["X-Penelope-Job"] == hooked
        body = json.loads(hit.body)
        assert (body["state"], body["status"], body["result"]["error"]) == ("done", 500, refused)
    assert "could not be stored; a 500 that says why is stored instead" in worker.log()


# --- owned claims ---------------------------------------------------------------------------


def attempts_of(job_id: str):
    """The job's recorded delivery attempts, as (number, outcome)."""
    return DeliveryAttempt.objects.filter(job_id=job_id).order_by("number").values_list("number", "outcome")


def test_an_outcome_recorded_long_after_the_send_is_not_sent_again(make_worker, django_db_blocker):
    """The old claim was a window of WEBHOOK_TIMEOUT_S + 5 s; the lock here keeps
    the record back past it while a second deliverer runs the whole time."""
    # The POST's timeout leaves room for a loaded machine: the receiver takes
    # the write lock before it answers, and a timed-out POST is a retry.
    timeout_s = 2
    old_claim_window_s = timeout_s + 5
    env = {"DB_BUSY_TIMEOUT_S": BUSY_S, "WEBHOOK_TIMEOUT_S": str(timeout_s), "WEBHOOK_ATTEMPTS_S": "0,30,60,90"}
    worker = make_worker(env=env)
    worker_db = WorkerStore(worker.store, django_db_blocker)
    held = threading.Event()

    def lock_before_answering(received: Received) -> None:
        # Take the write lock before the 200 goes out, so the sender cannot
        # record it, and keep it past the old claim window.
        if held.is_set():
            return
        held.set()
        lock = write_lock(worker.store)
        lock.__enter__()
        threading.Timer(old_claim_window_s + 1, lock.__exit__, (None, None, None)).start()

    # The second deliverer looks for due attempts ten times a second: once the
    # lock is gone it sees the attempt, long past the old window, before the
    # worker's next try at its record.
    second = start_command(
        worker, "deliver_webhooks", "--loop", log=worker.store.parent / "second-deliverer.log", WEBHOOK_POLL_S="0.1"
    )
    try:
        with Receiver(on_request=lock_before_answering) as receiver, worker.client() as api:
            job_id = started(api, "web/state", callback=receiver.url + "/200/late-record")
            wait_until(lambda: worker_db.exists(DeliveryAttempt.objects.filter(job_id=job_id)),
                       timeout=30, what="the delivery to be recorded")
            assert api.get(f"/jobs/{job_id}").status_code == 404
            hits = receiver.received("/200/late-record")
        assert [hit.headers["X-Penelope-Attempt"] for hit in hits] == ["1"]
        assert worker_db.list(attempts_of(job_id)) == [(1, "delivered")]
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    assert NEVER_RETRIED not in worker.log()


def test_a_deliverer_killed_between_send_and_record_resends_that_attempt_once(make_worker, django_db_blocker):
    worker = make_worker(env={"WEBHOOK_ATTEMPTS_S": "0,30,60,90", "WEBHOOK_TIMEOUT_S": "5"})
    worker_db = WorkerStore(worker.store, django_db_blocker)

    def kill_the_sender_first(received: Received) -> None:
        if received.headers["X-Penelope-Attempt"] == "1" and worker.process.poll() is None:
            worker.kill()  # mid-send: the POST is here, its outcome will never be recorded

    with Receiver(on_request=kill_the_sender_first) as receiver:
        with worker.client() as api:
            job_id = started(api, "web/state", callback=receiver.url + "/200/killed")
        wait_until(lambda: worker.process.poll() is not None, what="the worker to be killed mid-send")
        # The killed worker's claim and its count of attempts sent stay in the store.
        [job] = worker_db.list(Job.objects.filter(id=job_id))
        assert job.claim_owner is not None and job.attempts == 1
        deliverer = start_command(worker, "deliver_webhooks", "--loop", log=worker.store.parent / "deliverer.log")
        try:
            wait_until(lambda: worker_db.exists(DeliveryAttempt.objects.filter(job_id=job_id)),
                       timeout=30, what="the resent attempt to be recorded")
        finally:
            deliverer.send_signal(signal.SIGTERM)
            assert deliverer.wait(30) == 0
        hits = receiver.received("/200/killed")
    assert [(hit.headers["X-Penelope-Job"], hit.headers["X-Penelope-Attempt"]) for hit in hits] == [(job_id, "1")] * 2
    assert worker_db.list(attempts_of(job_id)) == [(1, "delivered")]
    assert not worker_db.exists(Job.objects.all())


# --- short write transactions -------------------------------------------------------------


def fill_with_expired_jobs(store: Path, count: int) -> None:
    """`count` polling jobs past their deadline, each holding one media file."""
    now = time.time()
    media = store / "media"
    media.mkdir(exist_ok=True)
    with sqlite3.connect(store / "penelope.db", timeout=30) as db:
        for n in range(count):
            job_id = f"{n:016x}"
            name = f"expired{n:06d}.bin"
            (media / name).write_bytes(b"x")
            db.execute(
                "insert into jobs_job (id, page_id, plugin, params, state, mode, ttl, accepted_at, started_at, "
                "finished_at, expires_at, status, result, media_tokens, attempts, last_slot) "
                "values (?, 'main', 'testing/sleep', '{}', 'done', 'poll', 1, ?, ?, ?, ?, 200, '{}', '[]', 0, -1)",
                (job_id, now - 100, now - 100, now - 90, now - 89),
            )
            db.execute(
                "insert into media_store_mediafile (token, path, filename, size, content_type, created_at, "
                "expires_at, holder, held_until) values (?, ?, 'x.bin', 1, 'application/octet-stream', ?, ?, ?, ?)",
                (f"token{n:06d}", name, now - 95, now + 200, job_id, now - 89),
            )


@pytest.mark.serial  # each start under 0.4 s: a time bound (pytest.ini)
def test_job_starts_do_not_wait_on_a_sweep_of_ten_thousand_jobs(make_worker, django_db_blocker):
    worker = make_worker(env={"SWEEP_S": "3600"})
    worker_db = WorkerStore(worker.store, django_db_blocker)
    fill_with_expired_jobs(worker.store, 10_000)
    log = worker.store.parent / "sweep.log"
    waits: list[float] = []  # of the starts made while the sweep was deleting

    def expired_left() -> int:
        return worker_db.count(Job.objects.filter(expires_at__lt=time.time()))

    with worker.client() as api:
        sweeper = start_command(worker, "sweep", log=log)
        while sweeper.poll() is None:
            before = expired_left()
            began = time.perf_counter()
            response = api.post("/main/plugin/web/state", headers={"X-Result-Ttl": "5"})
            took = time.perf_counter() - began
            assert response.status_code == 202, response.text
            if 0 < before < 10_000 or 0 < expired_left() < 10_000:
                waits.append(took)
            page_idle(api)
    assert sweeper.returncode == 0
    assert "swept 10000 jobs" in log.read_text()  # and with them their files:
    assert not list((worker.store / "media").glob("expired*"))
    assert not worker_db.exists(MediaFile.objects.all())
    assert len(waits) >= 3, f"only {len(waits)} starts overlapped the sweep's deletions"
    # The target is 200 ms; the bound leaves room for a shared two-core machine.
    assert max(waits) < 0.4, sorted(waits)[-5:]


# --- operator commands as loops that last ----------------------------------------------------


def test_sweep_loop_survives_a_locked_database_and_stops_on_sigterm(make_worker):
    worker = make_worker()
    log = worker.store.parent / "sweep-loop.log"
    sweeper = start_command(worker, "sweep", "--loop", "--interval", "0.1", log=log, DB_BUSY_TIMEOUT_S=BUSY_S)
    try:
        wait_until(lambda: "swept 0 jobs" in log.read_text(), what="a first sweep")
        with write_lock(worker.store):
            wait_until(lambda: "loop sweep: a step failed" in log.read_text(), what="a failed sweep")
        sweeps_before = log.read_text().count("swept 0 jobs")
        wait_until(lambda: log.read_text().count("swept 0 jobs") > sweeps_before, what="a sweep after the lock")
    finally:
        sweeper.send_signal(signal.SIGTERM)
        assert sweeper.wait(30) == 0


def test_deliver_webhooks_loop_stops_on_sigterm_and_gives_up_its_claims(make_worker):
    worker = make_worker()
    deliverer = start_command(worker, "deliver_webhooks", "--loop", log=worker.store.parent / "deliverer.log")
    owners = worker.store / "deliverers"
    # Two life locks: the worker's deliverer and this one.
    wait_until(lambda: len(list(owners.glob("*.lock"))) == 2, what="the deliverer's life lock")
    deliverer.send_signal(signal.SIGTERM)
    assert deliverer.wait(30) == 0
    assert len(list(owners.glob("*.lock"))) == 1


def test_recover_jobs_holds_the_store_while_it_runs(make_worker):
    first = make_worker()
    first.stop()
    log = first.store.parent / "recover.log"
    with write_lock(first.store):
        # recover_jobs takes the store, then waits on the database lock.
        recovering = start_command(first, "recover_jobs", log=log, DB_BUSY_TIMEOUT_S="60")
        lock_file = first.store / "worker.lock"
        wait_until(lambda: lock_file.read_text().endswith(" recover_jobs"), what="recover_jobs to take the store")
        assert store_lock.is_held(lock_file)
        refused = subprocess.run(
            [sys.executable, "manage.py", "serve"], cwd=ROOT, env=command_env(first), capture_output=True, text=True,
            timeout=60,
        )
        assert refused.returncode != 0 and "in use by recover_jobs" in refused.stderr, refused.stderr
    assert recovering.wait(60) == 0
    assert "0 jobs interrupted" in log.read_text()


# --- the request log under a locked database ------------------------------------------------


def test_a_request_log_that_cannot_flush_counts_every_row_it_drops(make_worker, django_db_blocker):
    worker = make_worker(env={"DB_BUSY_TIMEOUT_S": BUSY_S, "REQUEST_LOG_BUFFER_ROWS": "8", "REQUEST_LOG_FLUSH_S": "0.1"})
    worker_db = WorkerStore(worker.store, django_db_blocker)

    def whole_log() -> str:
        return worker.log_path.read_text(errors="replace")  # worker.log() is only the tail

    def dropped() -> int:
        found = re.findall(r"the request log buffer was full: (\d+) rows were dropped", whole_log())
        return sum(int(count) for count in found)

    def logged() -> int:
        return worker_db.count(RequestLogEntry.objects.filter(route="pages"))

    def failed_flushes() -> int:
        return whole_log().count("loop request log: a step failed")

    sent = 0
    with worker.client() as api, write_lock(worker.store):
        # Flushes fail while requests keep coming: rows go back beside newer ones.
        for _ in range(4):
            failures = failed_flushes()
            for _ in range(10):
                assert api.get("/pages").status_code == 200
                sent += 1
            wait_until(lambda failures=failures: failed_flushes() > failures + 1, what="failed flushes")
    wait_until(lambda: logged() + dropped() == sent, timeout=20, what="every row written or counted as dropped")
    assert dropped() > 0 and logged() > 0


# --- one path to the database ------------------------------------------------------------------


def test_every_database_call_of_the_worker_goes_through_one_thread(make_worker):
    worker = make_worker(env={"SWEEP_S": "0.2", "WEBHOOK_ATTEMPTS_S": "0,0.2,0.4,0.6", "WEBHOOK_TIMEOUT_S": "0.5"})
    with Receiver() as receiver, worker.client() as api:
        job_id = started(api, "testing/media", {"size": 100}, ttl=0.5)
        media_url = ended(api, job_id)["result"]["media"]["url"]
        assert api.get(media_url.removeprefix("/api/v1")).status_code == 200
        plain = api.get("/main/plugin/testing/media", params={"size": 10}).json()["media"]["url"]
        assert api.get(plain.removeprefix("/api/v1")).status_code == 200
        hook = started(api, "web/state", callback=receiver.url + "/500,200/one-path")
        wait_until(lambda: api.get(f"/jobs/{hook}").status_code == 404, what="the webhook to be delivered")
        assert api.get("/activity").status_code == api.get("/workload").status_code == 200
        wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, what="the polling job to expire")
    assert worker.stop() == 0
    log = worker.log_path.read_text(errors="replace")
    assert "database connection opened outside the database thread" not in log
    assert log.count("database connection opened on the database thread") == 1
