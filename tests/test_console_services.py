"""The console on its own (`manage.py console`), as on Kubernetes: a real
worker with a read key, a job done and one failed; the console run as a real
process from a fleet file naming that worker's address and one where nothing
listens. Through the console: the fleet's job search for scripts, the fleet
page (the worker awake with its counts, the other asleep), a persona's page
without actions or waker links. On the worker: its overview routes, which
take a read key, refuse what they cannot use and are not client activity."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from console.fleet_file import ServicePersona
from console.fleet_http import ASLEEP_REASON, ServiceFleet
from harness.worker import ROOT, WorkerProcess, free_port, start_manage, wait_healthy, wait_until
from tests.conftest import worker_env

READ_KEY = "console-read-" + secrets.token_hex(16)
CONSOLE_KEY = "console-sign-in-" + secrets.token_hex(16)
ALICE = "alice"
GONE = "gone"  # a persona whose address no worker listens on: scaled to zero


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(PENELOPE_READ_KEYS=READ_KEY)).start()
    yield running
    running.stop()


def ended(api: httpx.Client, job_id: str) -> dict:
    return wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}").json()) and body["state"] not in ("queued", "running") and body,
        what=f"job {job_id} to end",
    )


@pytest.fixture(scope="module")
def jobs(worker: WorkerProcess) -> dict[str, str]:
    """A job done and one failed (testing/refuse answers 418), both ended."""
    with worker.client() as api:
        started = {
            "done": api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "600"}),
            "failed": api.post("/main/plugin/testing/refuse", json={}, headers={"X-Result-Ttl": "600"}),
        }
        ids = {}
        for outcome, response in started.items():
            assert response.status_code == 202, response.text
            ids[outcome] = response.json()["job_id"]
        assert ended(api, ids["done"])["status"] == 200
        assert ended(api, ids["failed"])["status"] == 418
    return ids


@dataclass
class Console:
    base_url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:]

    @contextlib.contextmanager
    def signed_in(self) -> Iterator[httpx.Client]:
        """A browser's session: the cookie of a sign-in with the console's key."""
        with httpx.Client(base_url=self.base_url, timeout=30) as client:
            answer = client.post("/console/sign-in", data={"key": CONSOLE_KEY, "next": "/console/"})
            assert answer.status_code == 302, answer.text
            yield client


def console_env(fleet: Path, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "",
        "PYTHONUNBUFFERED": "1",
        "WAKER_KEY": CONSOLE_KEY,
        "CONSOLE_HOST": "127.0.0.1",
        "CONSOLE_PORT": str(port),
        "CONSOLE_FLEET": str(fleet),
        "CONSOLE_READ_EVERY_S": "0",
        "CONSOLE_READ_TIMEOUT_S": "5",
        "CONSOLE_REFUSAL_S": "0.05",
        "READ_KEY_ALICE": READ_KEY,
        "READ_KEY_GONE": "a-key-nobody-checks-" + secrets.token_hex(8),
    }


@pytest.fixture(scope="module")
def console(worker: WorkerProcess, jobs: dict[str, str], tmp_path_factory) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    fleet = folder / "fleet.json"
    fleet.write_text(json.dumps({"personas": [
        {"name": ALICE, "url": worker.base_url, "read_key_env": "READ_KEY_ALICE"},
        {"name": GONE, "url": f"http://127.0.0.1:{free_port()}/", "read_key_env": "READ_KEY_GONE", "mode": "always"},
    ]}))
    port = free_port()
    log_path = folder / "console.log"
    process = start_manage("console", console_env(fleet, port), log_path)
    running = Console(f"http://127.0.0.1:{port}", process, log_path)
    try:
        assert wait_healthy(process, running.base_url + "/console/sign-in", 60, running.log), running.log()
        yield running
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(30) == 0, running.log()
        except subprocess.TimeoutExpired:
            process.kill()
            raise


def read_headers(key: str = READ_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- the worker's overview routes ---------------------------------------------------------


def test_the_overview_takes_a_read_key_and_says_what_the_console_shows(worker, jobs):
    url = worker.base_url + "/api/v1/overview"
    refused = httpx.get(url)
    assert refused.status_code == 401 and refused.json()["success"] is False
    assert httpx.get(url, headers=read_headers("not-a-key")).status_code == 401
    answer = httpx.get(url, headers=read_headers())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["success"], body["page_id"]) == (True, None)
    assert body["row"]["jobs"] == {"running": 0, "queued": 0, "failed_hour": 1, "failed_day": 1}
    assert len(body["row"]["requests_by_hour"]) == 24 and sum(body["row"]["requests_by_hour"]) >= 2
    [failure] = body["overview"]["failures"]
    assert (failure["id"], failure["status"], failure["error"]) == (jobs["failed"], 418, "The testing plugin refuses.")
    minute = body["overview"]["series"]["minute"]
    assert len(minute["jobs_ok"]) == 60 and sum(minute["jobs_ok"]) == 1 and sum(minute["jobs_failed"]) == 1
    live = body["live"]
    assert live["memory_bytes"] > 10**6 and live["browser_state"] == "up" and "main" in live["open_pages"]
    assert live["busy_pages"] == [] and live["started_at"] < time.time()


def test_the_overview_jobs_search_the_store_by_the_console_s_rules(worker, jobs):
    url = worker.base_url + "/api/v1/overview/jobs"
    assert httpx.get(url).status_code == 401

    def search(**params: str) -> httpx.Response:
        return httpx.get(url, params=params, headers=read_headers())

    listed = search().json()["jobs"]
    assert [job["id"] for job in listed[:2]] == [jobs["failed"], jobs["done"]]  # newest first
    # A refused job is `done` too, with its status: the plugin tells them apart.
    assert {job["id"] for job in search(state="done").json()["jobs"]} == set(jobs.values())
    [done] = search(state="done", plugin="testing/sleep").json()["jobs"]
    assert (done["id"], done["status"], done["error"]) == (jobs["done"], 200, None)
    assert [job["id"] for job in search(job_id=jobs["failed"]).json()["jobs"]] == [jobs["failed"]]
    assert search(plugin="testing/refuse", since=str(time.time() - 3600)).json()["jobs"][0]["id"] == jobs["failed"]
    assert search(until="2000-01-01T00:00").json()["jobs"] == []
    assert len(search(limit="1").json()["jobs"]) == 1
    for params, named in (
        ({"persona": ALICE}, "Unknown parameter 'persona'"),
        ({"nope": "1"}, "Unknown parameter 'nope'"),
        ({"state": "sleeping"}, "Invalid parameter 'state'"),
        ({"state": ""}, "Invalid parameter 'state'"),
        ({"limit": "1.0"}, "Invalid parameter 'limit'"),
        ({"limit": "0"}, "Invalid parameter 'limit'"),
        ({"since": "yesterday"}, "Invalid parameter 'since'"),
    ):
        refused = search(**params)
        assert refused.status_code == 400 and refused.json()["error"].startswith(named), (params, refused.text)


def test_reading_the_overview_is_not_client_activity(worker, jobs):
    def activity() -> dict:
        with worker.client() as api:
            return api.get("/activity").json()

    wait_until(lambda: activity()["idle_seconds"] > 0.3, what="the worker to be idle")
    before = activity()
    with worker.client() as api:  # the full key: the route itself is quiet, whoever asks
        for _ in range(3):
            assert api.get("/overview").status_code == 200
            assert api.get("/overview/jobs", params={"state": "done"}).status_code == 200
    for _ in range(3):
        assert httpx.get(worker.base_url + "/api/v1/overview", headers=read_headers()).status_code == 200
    after = activity()
    assert after["last_activity_at"] == before["last_activity_at"]
    assert after["idle_seconds"] >= before["idle_seconds"] and after["requests_in_flight"] == 0
    with worker.client() as api:
        routes = {route["route"] for route in api.get("/workload").json()["routes"]}
    assert not {route for route in routes if route.startswith("overview")}, routes  # not logged either


# --- the fleet read through Services, in-process ---------------------------------------


def test_a_persona_that_stops_answering_shows_what_was_last_read(worker, jobs):
    """The worker answers, then its address stops answering (KEDA scaled it
    to zero): the row keeps the last figures, with their age; a wrong read
    key is a failure that says so."""

    async def scenario():
        fleet = ServiceFleet([ServicePersona(ALICE, worker.base_url, READ_KEY)])
        try:
            [awake] = await fleet.rows()
            fleet.personas[ALICE] = ServicePersona(ALICE, f"http://127.0.0.1:{free_port()}", READ_KEY)
            [asleep] = await fleet.rows()
            detail = await fleet.detail(ALICE)
            fleet.personas[ALICE] = ServicePersona(ALICE, worker.base_url, "not-the-read-key")
            [refused] = await fleet.rows()
        finally:
            await fleet.close()
        return awake, asleep, detail, refused

    awake, asleep, detail, refused = asyncio.run(scenario())
    assert (awake.state, awake.reason, awake.failed_hour, awake.pages_open) == ("awake", None, 1, 1)
    assert awake.uptime_s > 0 and awake.memory_bytes > 10**6 and awake.last_woke_at < awake.read_at
    assert asleep.state == "asleep" and asleep.reason.startswith(ASLEEP_REASON + "; figures as last read, ")
    assert (asleep.failed_hour, asleep.pages_open, asleep.memory_bytes) == (1, 1, awake.memory_bytes)
    assert asleep.uptime_s is None and asleep.memory_read_at == awake.memory_read_at
    assert (detail.can_act, detail.waker_links) == (False, False)
    assert detail.overview["failures"][0]["id"] == jobs["failed"]
    assert [peak for peak in detail.memory["minute"] if peak is not None] == [awake.memory_bytes]
    assert refused.state == "failing" and refused.reason.startswith("its read key is refused (401)")


# --- the console ---------------------------------------------------------------------------


def test_the_fleet_jobs_api_finds_the_jobs_through_the_worker_s_service(console, jobs):
    url = console.base_url + "/api/v1/fleet/jobs"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers=read_headers(READ_KEY)).status_code == 401  # a persona's read key is no console key
    answer = httpx.get(url, headers=read_headers(CONSOLE_KEY), timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert {(job["persona"], job["id"]) for job in body["jobs"]} >= {(ALICE, jobs["done"]), (ALICE, jobs["failed"])}
    assert body["personas"][ALICE] == "service"
    assert body["personas"][GONE].startswith("not read: no replica answers")
    query = {"persona": ALICE, "plugin": "testing/sleep"}
    done = httpx.get(url, params=query, headers=read_headers(CONSOLE_KEY), timeout=30).json()
    assert [job["id"] for job in done["jobs"]] == [jobs["done"]] and list(done["personas"]) == [ALICE]
    bad = httpx.get(url, params={"nope": "1"}, headers=read_headers(CONSOLE_KEY))
    assert bad.status_code == 400 and "Unknown parameter 'nope'" in bad.json()["error"]


def row_of(page: str, name: str) -> str:
    match = re.search(rf'<tr data-persona="{name}".*?</tr>', page, re.S)
    assert match, page
    return match.group(0)


def field(row: str, name: str) -> str:
    match = re.search(rf'data-field="{name}"[^>]*>(.*?)</', row, re.S)
    assert match, (name, row)
    return match.group(1).strip()


def test_the_fleet_page_shows_the_worker_awake_and_the_missing_one_asleep(console):
    with console.signed_in() as client:
        page = client.get("/console/")
        assert page.status_code == 200, page.text
        rows = client.get("/console/", params={"fragment": "rows"}).text
    alice, gone = row_of(rows, ALICE), row_of(rows, GONE)
    assert 'data-state="awake"' in alice and 'data-field="reason"' not in alice
    assert (field(alice, "jobs_running"), field(alice, "jobs_queued")) == ("0", "0")
    assert (field(alice, "failed_hour"), field(alice, "failed_day")) == ("1", "1")
    assert field(alice, "pages_open") == "1" and field(alice, "memory").endswith("MB")
    assert 'data-state="asleep"' in gone
    assert field(gone, "reason") == (
        "no replica answers (KEDA scaled it to zero, or it is down); never read"
    )


def test_a_persona_page_has_no_actions_and_no_waker_links(console, jobs):
    with console.signed_in() as client:
        page = client.get(f"/console/p/{ALICE}/")
        assert page.status_code == 200, page.text
        body = page.text
        assert 'state-awake' in body and jobs["failed"] in body  # the recent failure, from the worker's store
        assert "/w/" not in body and "act?action=" not in body and 'name="action"' not in body
        assert f'href="/console/p/{ALICE}/metrics"' in body
        metrics = client.get(f"/console/p/{ALICE}/metrics")
        assert metrics.status_code == 200 and "penelope_" in metrics.text
        assert client.get(f"/console/p/{ALICE}/act", params={"action": "stop"}).status_code == 404
        asleep = client.get(f"/console/p/{GONE}/")
        assert asleep.status_code == 200 and "state-asleep" in asleep.text
        assert client.get(f"/console/p/{GONE}/metrics").status_code == 503


def run_console(tmp_path: Path, fleet: object, **env: str) -> subprocess.CompletedProcess:
    path = tmp_path / "fleet.json"
    path.write_text(fleet if isinstance(fleet, str) else json.dumps(fleet))
    return subprocess.run(
        [sys.executable, "manage.py", "console", "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={**console_env(path, free_port()), **env},
    )


def test_the_console_refuses_a_fleet_file_it_cannot_use_and_a_missing_key(tmp_path):
    persona = {"name": ALICE, "url": "http://penelope-alice.penelope.svc.cluster.local:5000", "read_key_env": "READ_KEY_ALICE"}
    for fleet, said in (
        ("{", "is not valid JSON"),
        ({"personas": []}, "personas: This list may not be empty."),
        ({"personas": [{**persona, "url": "ftp://x"}]}, "personas[0].url: An http:// or https:// URL"),
        ({"personas": [{**persona, "url": "http://x:5000/api/v1"}]}, "personas[0].url: Only the scheme, the host and the port"),
        ({"personas": [{**persona, "read_key": "inline"}]}, "personas[0].read_key: Not a field of a persona"),
        ({"personas": [{**persona, "read_key_env": "READ_KEY_NOBODY_SET"}]}, "READ_KEY_NOBODY_SET is not set in the console's environment"),
        ({"personas": [persona, persona]}, "names persona alice twice"),
    ):
        done = run_console(tmp_path, fleet)
        assert done.returncode != 0 and said in done.stderr, (fleet, done.stderr)
    done = run_console(tmp_path, {"personas": [persona]}, WAKER_KEY="")
    assert done.returncode != 0 and "Set WAKER_KEY" in done.stderr
