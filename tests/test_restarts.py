"""Jobs across a crash (SIGKILL) and a restart of the real worker process."""

from __future__ import annotations

import json
import sqlite3
import time

from harness.receiver import Receiver
from harness.worker import wait_until
from tests.test_jobs import JOB_KEYS, ended, started


def job_rows(worker, job_id: str) -> list:
    with sqlite3.connect(worker.store / "penelope.db") as db:
        return db.execute("select state from jobs_job where id = ?", (job_id,)).fetchall()


def test_jobs_running_at_a_crash_are_interrupted_and_still_delivered(make_worker):
    with Receiver() as receiver:
        worker = make_worker(env={"MAX_PAGES": "3", "WEBHOOK_ATTEMPTS_S": "0,0.5,1,1.5"})
        with worker.client() as api:
            api.post("/pages", json={"page_id": "second"})
            polled = started(api, "testing/sleep", {"seconds": 60}, ttl=30)
            hooked = started(api, "testing/sleep", {"seconds": 60}, page="second", callback=receiver.url + "/200/crash")
        worker.kill()
        restarted_at = time.time()
        worker.start()
        with worker.client() as api:
            body = api.get(f"/jobs/{polled}").json()
            assert set(body) == JOB_KEYS
            assert body["state"] == "interrupted" and body["status"] == 503
            assert body["result"] == {
                "success": False, "error": "job interrupted: the worker stopped before it ended", "page_id": "main",
            }
            assert body["finished_at"] >= restarted_at  # ended at the new start ...
            assert 25 < body["expires_in"] <= 30  # ... and held ttl from then
            wait_until(lambda: receiver.received("/200/crash"), what="the interrupted job's webhook")
            hit = receiver.received("/200/crash")[0]
            assert hit.headers["X-Penelope-Job"] == hooked
            assert json.loads(hit.body)["state"] == "interrupted"
            # The browser came back with page main idle.
            assert api.get("/main").json()["busy"] is False


def test_attempts_missed_while_down_collapse_into_one(make_worker):
    with Receiver() as receiver:
        worker = make_worker(env={"WEBHOOK_ATTEMPTS_S": "0,1,2,60", "WEBHOOK_TIMEOUT_S": "0.5"})
        with worker.client() as api:
            job_id = started(api, "web/state", callback=receiver.url + "/500/collapse")
            wait_until(lambda: receiver.received("/500/collapse"), what="attempt 1")
            finished_at = json.loads(receiver.received("/500/collapse")[0].body)["finished_at"]
            wait_until(
                lambda: api.get(f"/jobs/{job_id}").json()["delivery"]["error"] is not None, what="attempt 1 recorded"
            )
        worker.kill()
        wait_until(lambda: time.time() > finished_at + 2.2, what="slots 2 and 3 to pass with the worker down")
        worker.start()
        wait_until(lambda: len(receiver.received("/500/collapse")) == 2, what="the collapsed attempt")
        with worker.client() as api:
            wait_until(lambda: api.get(f"/jobs/{job_id}").json()["delivery"]["attempts"] == 2, what="it is recorded")
            body = api.get(f"/jobs/{job_id}").json()
        second = receiver.received("/500/collapse")[1]
        assert second.headers["X-Penelope-Attempt"] == "3"  # slots 2 and 3 became one
        assert body["state"] == "done" and body["delivery"]["delivered"] is False
        assert len(receiver.received("/500/collapse")) == 2  # slot 4 is a minute away


def test_jobs_past_their_deadline_at_start_are_deleted_without_a_last_try(make_worker):
    with Receiver() as receiver:
        worker = make_worker(env={"WEBHOOK_ATTEMPTS_S": "0,0.1,0.2,0.3", "WEBHOOK_TIMEOUT_S": "0.2"})
        with worker.client() as api:
            polled = started(api, "web/state", ttl=0.5)
            ended(api, polled)
            # A webhook job still failing when the worker dies.
            hooked = started(api, "web/state", callback=receiver.url + "/500,500,500,500/late")
            wait_until(lambda: receiver.received("/500,500,500,500/late"), what="attempt 1")
        worker.kill()
        tries_before = len(receiver.received("/500,500,500,500/late"))
        deadline = time.time() + 0.6  # past both deadlines (ttl 0.5; last slot 0.3 + timeout 0.2)
        wait_until(lambda: time.time() > deadline, what="the deadlines to pass")
        worker.start()
        with worker.client() as api:
            assert api.get(f"/jobs/{polled}").status_code == 404
            assert api.get(f"/jobs/{hooked}").status_code == 404
        assert job_rows(worker, polled) == [] and job_rows(worker, hooked) == []
        assert len(receiver.received("/500,500,500,500/late")) == tries_before
