"""Schedules against a real worker, a real browser and the testing family's
slow plugin: fires at their instants, each overlap policy, pause and
resume, trigger (the API's and the command's), catch-up and missed fires
across a stop, and bad input refused with nothing stored.

Schedules here use 6-field crons (seconds first) so they fire every
second or two; the loop reads the store every SCHEDULE_CHECK_S (0.3 s
here). Waits are on conditions; where a test must let time pass (a
paused schedule that must not fire), it waits for the clock itself."""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

import pytest
from websockets.sync.client import connect

from harness.worker import ROOT, WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.test_schedule_rules import BAD_FIELDS, VALID

ENV = {"SCHEDULE_CHECK_S": "0.3", "CANCEL_GRACE_S": "0.5", "MAX_PAGES": "6"}
EVERY_SECOND = "* * * * * *"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**ENV)).start()
    yield running
    running.stop()


def schedule(api, name: str, *, seconds: float = 0, page: str = "main", cron: str = EVERY_SECOND, **fields) -> dict:
    body = {
        "name": name, "cron": cron, "page_id": page, "plugin": "testing/sleep",
        "params": {"seconds": seconds, "tag": name}, "result_ttl": 120, **fields,
    }
    response = api.post("/schedules", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def jobs_of(api, schedule_id: str) -> list[dict]:
    """The schedule's jobs, oldest first."""
    response = api.get("/jobs", params={"schedule": schedule_id, "limit": 200})
    assert response.status_code == 200, response.text
    return response.json()["jobs"][::-1]


def read(api, schedule_id: str) -> dict:
    return api.get(f"/schedules/{schedule_id}").json()


def remove(api, schedule_id: str) -> None:
    """Delete the schedule, then cancel the jobs it left waiting or running."""
    assert api.delete(f"/schedules/{schedule_id}").status_code == 204
    for job in jobs_of(api, schedule_id):
        if job["state"] in ("queued", "running"):
            api.post(f"/jobs/{job['job_id']}/cancel")


def open_page(api, page: str) -> None:
    assert api.post("/pages", json={"page_id": page}).status_code == 201


@pytest.mark.serial  # fires under 0.1 s late: a time bound (pytest.ini)
def test_a_schedule_fires_at_its_instants_and_its_jobs_name_it(api, worker):
    with connect(
        f"ws://127.0.0.1:{worker.port}/api/v1/events", additional_headers={"Authorization": f"Bearer {worker.key}"}
    ) as socket:
        created = schedule(api, "every-second")
        sid = created["schedule_id"]
        assert created["next_fire_at"] == int(created["next_fire_at"]) and created["next_fire_at"] > time.time() - 1
        fired = json.loads(socket.recv(timeout=10))
        while fired["event"] != "schedule.fired":
            fired = json.loads(socket.recv(timeout=10))
    assert fired["detail"]["schedule_id"] == sid and fired["job"]["schedule_id"] == sid
    jobs = wait_until(lambda: (found := jobs_of(api, sid)) and len(found) >= 4 and found, what="four fires")
    assert api.patch(f"/schedules/{sid}", json={"paused": True}).status_code == 200
    # Every fire before the pause, counted once its job is stored and recorded.
    stored = wait_until(lambda: (found := read(api, sid))["fired"] == len(jobs_of(api, sid)) and found, what="the count")
    jobs = jobs_of(api, sid)
    remove(api, sid)
    assert stored["fired"] == len(jobs) and stored["last_job_id"] == jobs[-1]["job_id"]
    assert stored["last_fired_at"] == int(jobs[-1]["started_at"])
    assert fired["job_id"] == jobs[0]["job_id"]
    # Each job started a few ms after its whole second (the loop sleeps to the instant, it does not poll).
    lateness = [job["started_at"] - int(job["started_at"]) for job in jobs[:4]]
    assert statistics.median(lateness) < 0.1, lateness
    assert len({int(job["started_at"]) for job in jobs}) == len(jobs)  # one fire per instant
    done = wait_until(lambda: (body := api.get(f"/jobs/{jobs[0]['job_id']}").json())["state"] == "done" and body, what="the job")
    assert done["schedule_id"] == sid and done["result"]["tag"] == "every-second"
    # A client's own job answers as the guide shows it, without the key.
    plain = api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "60"}).json()
    assert "schedule_id" not in api.get(f"/jobs/{plain['job_id']}").json()
    assert all(job["schedule_id"] == sid for job in jobs)
    assert plain["job_id"] not in {job["job_id"] for job in jobs_of(api, sid)}
    metrics = api.get("/metrics").text
    assert any(line.startswith("penelope_schedule_fires_total ") and float(line.split()[1]) >= 4 for line in metrics.splitlines())


def test_overlap_skip_leaves_the_running_job_alone(api):
    open_page(api, "p-skip")
    sid = schedule(api, "skips", seconds=30, page="p-skip")["schedule_id"]
    stored = wait_until(lambda: (found := read(api, sid))["skipped"] >= 2 and found, what="two skipped fires")
    jobs = jobs_of(api, sid)
    remove(api, sid)
    assert len(jobs) == 1 and jobs[0]["state"] == "running"
    assert stored["fired"] == 1 and stored["last_job_id"] == jobs[0]["job_id"]
    assert api.get(f"/schedules/{sid}").status_code == 404


def test_overlap_queue_starts_anyway_and_the_fires_wait_their_turn(api):
    open_page(api, "p-queue")
    sid = schedule(api, "queues", seconds=30, page="p-queue", overlap="queue", queue_timeout=60)["schedule_id"]
    jobs = wait_until(lambda: (found := jobs_of(api, sid)) and len(found) >= 3 and found, what="three fires")
    remove(api, sid)
    assert [job["state"] for job in jobs[:3]] == ["running", "queued", "queued"]
    assert jobs[1]["queue"]["timeout_at"] == pytest.approx(jobs[1]["queue"]["enqueued_at"] + 60, abs=0.01)


def test_overlap_cancel_running_cancels_the_previous_job_then_starts(api):
    open_page(api, "p-cancel")
    sid = schedule(api, "cancels", seconds=30, page="p-cancel", overlap="cancel_running")["schedule_id"]
    jobs = wait_until(lambda: (found := jobs_of(api, sid)) and len(found) >= 3 and found, what="three fires")
    stored = read(api, sid)
    remove(api, sid)
    assert [job["state"] for job in jobs[:2]] == ["cancelled", "cancelled"]
    assert jobs[0]["status"] == 499 and stored["skipped"] == 0 and stored["fired"] >= 3


def test_pause_and_resume(api):
    sid = schedule(api, "pausable", cron="*/2 * * * * *")["schedule_id"]
    wait_until(lambda: read(api, sid)["fired"] >= 1, what="a first fire")
    paused = api.patch(f"/schedules/{sid}", json={"paused": True}).json()
    assert paused["paused"] is True and paused["next_fire_at"] is None
    count = len(jobs_of(api, sid))
    quiet_until = time.time() + 4.5  # two instants of */2 pass while it is paused
    wait_until(lambda: time.time() > quiet_until, what="the clock")
    assert len(jobs_of(api, sid)) == count and read(api, sid)["missed"] == 0
    resumed = api.patch(f"/schedules/{sid}", json={"paused": False}).json()
    assert resumed["next_fire_at"] > time.time() - 0.1
    wait_until(lambda: len(jobs_of(api, sid)) > count, what="a fire after resume")
    remove(api, sid)


def test_trigger_fires_now_and_answers_the_job_start(api):
    created = schedule(api, "on-demand", cron="0 0 1 1 *", seconds=2, paused=True, overlap="skip")
    sid = created["schedule_id"]
    started = api.post(f"/schedules/{sid}/trigger")
    assert started.status_code == 202, started.text
    body = started.json()
    assert set(body) == {"success", "page_id", "job_id", "status_url", "ttl", "callback", "state", "queue"}
    assert (body["page_id"], body["ttl"], body["state"]) == ("main", 120.0, "running")
    assert body["status_url"] == f"/api/v1/jobs/{body['job_id']}"
    again = api.post(f"/schedules/{sid}/trigger")  # its job still runs, and its overlap is skip
    assert again.status_code == 409 and "overlap is skip" in again.json()["error"]
    stored = read(api, sid)
    assert (stored["fired"], stored["skipped"], stored["last_job_id"]) == (1, 1, body["job_id"])
    assert stored["next_fire_at"] is None and stored["paused"] is True
    assert api.post("/schedules/0123456789abcdef/trigger").status_code == 404
    remove(api, sid)


def test_a_refused_start_is_counted_and_the_schedule_goes_on(api):
    sid = schedule(api, "no-page", page="closed-page", cron="*/2 * * * * *")["schedule_id"]
    stored = wait_until(lambda: (found := read(api, sid))["refused"] >= 2 and found, what="two refused fires")
    remove(api, sid)
    assert stored["fired"] == 0 and stored["last_error"] == "Page closed-page is not open."


def manage(worker: WorkerProcess, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PENELOPE_STORE": str(worker.store), "PENELOPE_KEY": worker.key}
    return subprocess.run(
        [sys.executable, "manage.py", "schedules", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_command_lists_pauses_and_triggers_through_the_store(api, worker):
    sid = schedule(api, "by-command", cron="0 0 1 1 *", seconds=0)["schedule_id"]
    listed = manage(worker, "list")
    assert listed.returncode == 0 and "by-command" in listed.stdout and "0 0 1 1 *" in listed.stdout
    requested = manage(worker, "trigger", "by-command")
    assert requested.returncode == 0 and "fire requested" in requested.stdout, requested.stderr
    jobs = wait_until(lambda: jobs_of(api, sid), what="the requested fire")  # at the loop's next check
    assert len(jobs) == 1 and read(api, sid)["fired"] == 1
    assert manage(worker, "pause", sid).returncode == 0 and read(api, sid)["paused"] is True
    assert manage(worker, "resume", "by-command").returncode == 0 and read(api, sid)["paused"] is False
    unknown = manage(worker, "pause", "nobody")
    assert unknown.returncode != 0 and "No such schedule" in unknown.stderr
    remove(api, sid)


def test_bad_input_answers_400_naming_the_field_and_stores_nothing(api):
    before = api.get("/schedules").json()["schedules"]
    for change, field, said in BAD_FIELDS:
        response = api.post("/schedules", json={**VALID, **change})
        assert response.status_code == 400, (change, response.text)
        assert response.json()["error"].startswith(f"Invalid parameter '{field}'"), response.text
        assert said is None or said in response.json()["error"]
    assert api.post("/schedules", content=b"{").status_code == 422
    assert api.get("/schedules").json()["schedules"] == before
    created = api.post("/schedules", json={**VALID, "paused": True})
    assert created.status_code == 201
    assert api.post("/schedules", json={**VALID, "paused": True}).status_code == 409
    assert api.patch(f"/schedules/{created.json()['schedule_id']}", json={"priority": 12}).status_code == 400
    assert read(api, created.json()["schedule_id"])["priority"] == 0
    assert api.get("/schedules/0123456789abcdef").status_code == 404
    assert api.delete("/schedules/0123456789abcdef").status_code == 404
    assert api.post("/pages", json={"page_id": "schedules"}).status_code == 400  # a route word, never a page
    remove(api, created.json()["schedule_id"])


# --- across a stop ----------------------------------------------------------------------------


def test_fires_missed_while_stopped_are_counted_and_the_latest_caught_up(make_worker):
    worker = make_worker(env=ENV)
    with worker.client() as api:
        hourly = {"cron": "0 * * * *", "seconds": 0}
        counted = schedule(api, "missed-only", **hourly)["schedule_id"]
        caught = schedule(api, "caught-up", **hourly, catchup_s=7200)["schedule_id"]
    worker.stop()
    last_hour = int(time.time()) // 3600 * 3600
    with sqlite3.connect(worker.store / "penelope.db") as db:  # the stop lasted four hourly instants
        db.execute("UPDATE schedules_schedule SET next_fire_at = ?", (last_hour - 3 * 3600,))
    worker.start()
    with worker.client() as api:
        caught_up = wait_until(lambda: (found := read(api, caught))["fired"] == 1 and found, what="the catch-up fire")
        assert caught_up["missed"] == 3 and caught_up["last_fired_at"] == last_hour
        job = api.get(f"/jobs/{caught_up['last_job_id']}").json()
        assert job["schedule_id"] == caught
        missed = read(api, counted)
        assert (missed["missed"], missed["fired"], jobs_of(api, counted)) == (4, 0, [])
        assert missed["next_fire_at"] == last_hour + 3600 == caught_up["next_fire_at"]


def test_a_change_through_the_api_wakes_the_loop_at_once(make_worker):
    """With SCHEDULE_CHECK_S at a minute, only the wake-up makes a new
    schedule, or a changed one, fire within seconds."""
    worker = make_worker(env={**ENV, "SCHEDULE_CHECK_S": "60"})
    with worker.client() as api:
        first = schedule(api, "woken-by-create")["schedule_id"]
        wait_until(lambda: read(api, first)["fired"] >= 1, timeout=10, what="a fire of the new schedule")
        remove(api, first)
        yearly = schedule(api, "woken-by-change", cron="0 0 1 1 *")["schedule_id"]
        assert api.patch(f"/schedules/{yearly}", json={"cron": EVERY_SECOND}).status_code == 200
        wait_until(lambda: read(api, yearly)["fired"] >= 1, timeout=10, what="a fire of the changed schedule")
        remove(api, yearly)
