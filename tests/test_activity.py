"""Activity, the request log, the workload and the memory purge: against real
workers (their SQLite file read directly), plus the summary arithmetic and the
purge's skip rules in-process."""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
import subprocess
import time
from collections.abc import Callable

import httpx
import pytest
from django.contrib.auth.models import User

from activity import log as request_log
from activity.models import RequestLogEntry
from activity.views import ActivityView
from browser.pages import Lease, ManagedPage, Waiter
from browser.purge import skip_reason
from harness.worker import WorkerProcess, wait_until

COLUMNS = ("id", "kind", "method", "route", "path", "page_id", "status", "duration_ms", "started_at", "job_id")


# --- helpers ---------------------------------------------------------------------


def log_rows(worker: WorkerProcess, where: str = "1", *args) -> list[dict]:
    with sqlite3.connect(worker.store / "penelope.db") as db:
        sql = f"select {', '.join(COLUMNS)} from activity_requestlogentry where {where} order by id"
        found = db.execute(sql, args).fetchall()
    db.close()
    return [dict(zip(COLUMNS, row, strict=True)) for row in found]


def barrier(worker: WorkerProcess, api: httpx.Client) -> int:
    """A request with a unique path; once its row is in the database, every
    row logged before it is too (the buffer is written in order). Answers its id."""
    page_id = "barrier-" + secrets.token_hex(4)
    assert api.get(f"/{page_id}").status_code == 404
    path = f"/api/v1/{page_id}"
    found = wait_until(lambda: log_rows(worker, "path = ?", path), timeout=10, what=f"the row of {path}")
    return found[0]["id"]


def logged_between(worker: WorkerProcess, api: httpx.Client, action: Callable[[], object]) -> list[dict]:
    """The rows `action`'s requests logged, and only those."""
    first = barrier(worker, api)
    action()
    last = barrier(worker, api)
    return log_rows(worker, "id > ? and id < ?", first, last)


async def until(client: httpx.AsyncClient, path: str, condition: Callable[[dict], bool], timeout: float = 10) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        body = (await client.get(path)).json()
        if condition(body):
            return body
        assert asyncio.get_running_loop().time() < deadline, f"{path} never met the condition; last {body}"
        await asyncio.sleep(0.01)


def activity(api: httpx.Client) -> dict:
    response = api.get("/activity")
    assert response.status_code == 200, response.text
    return response.json()


# --- the request log, against a real worker -------------------------------------------


def test_calls_are_logged_with_route_status_page_and_duration(api, worker, site):
    def calls():
        assert api.get("/main/plugin/testing/sleep", params={"seconds": 0.3}).status_code == 200
        assert api.post("/main/plugin/web/open", json={}).status_code == 400
        assert api.get("/nowhere/plugin/web/state").status_code == 404
        assert api.get("/main/plugin/testing/refuse").status_code == 418
        assert api.post("/main/primitive/content", json={}).status_code == 200
        assert api.get("/pages").status_code == 200
        assert api.get("/main").status_code == 200
        assert api.get("/no/such/route/here").status_code == 404

    rows = logged_between(worker, api, calls)
    assert [(r["method"], r["route"], r["path"], r["page_id"], r["status"]) for r in rows] == [
        ("GET", "plugin/testing/sleep", "/api/v1/main/plugin/testing/sleep", "main", 200),
        ("POST", "plugin/web/open", "/api/v1/main/plugin/web/open", "main", 400),
        ("GET", "plugin/web/state", "/api/v1/nowhere/plugin/web/state", "nowhere", 404),
        ("GET", "plugin/testing/refuse", "/api/v1/main/plugin/testing/refuse", "main", 418),
        ("POST", "primitive/content", "/api/v1/main/primitive/content", "main", 200),
        ("GET", "pages", "/api/v1/pages", None, 200),
        ("GET", "{page_id}", "/api/v1/main", "main", 200),
        ("GET", "(no route)", "/api/v1/no/such/route/here", None, 404),
    ]
    assert all(r["kind"] == "http" and r["job_id"] is None for r in rows)
    assert rows[0]["duration_ms"] >= 300  # the sleep ran that long, at least
    assert all(r["duration_ms"] >= 0 for r in rows)
    started = [r["started_at"] for r in rows]
    assert started == sorted(started) and abs(started[0] - time.time()) < 60


def test_polls_health_activity_and_workload_reads_are_not_logged(api, worker):
    def reads():
        for path in ("/jobs/0123456789abcdef", "/jobs/nope", "/jobs/", "/jobs/a/b"):
            assert api.get(path).status_code == 404  # no such job, or no such route
        assert api.get("/jobs").status_code == 200  # the job list: a read, like a poll
        assert api.get("/jobs/0123456789abcdef", params={"wait": "0.1"}).status_code == 404  # a long-poll too
        assert api.get("/health").status_code == 200
        assert api.get("/activity").status_code == 200
        assert api.get("/workload").status_code == 200
        assert api.get("/workload", params={"window_s": "-1"}).status_code == 400

    assert logged_between(worker, api, reads) == []


def test_unauthenticated_requests_are_not_logged(worker, api):
    def strangers():
        with httpx.Client(base_url=worker.base_url + "/api/v1") as stranger:
            assert stranger.get("/pages").status_code == 401
            assert stranger.get("/main/plugin/web/state", headers={"Authorization": "Bearer nope"}).status_code == 401

    assert logged_between(worker, api, strangers) == []


def test_a_download_is_logged_when_its_last_byte_is_sent_without_its_token(api, worker):
    link = api.get("/main/plugin/testing/media", params={"size": 2_000_000}).json()["media"]

    def download():
        assert len(api.get(worker.base_url + link["url"]).content) == 2_000_000

    (row,) = logged_between(worker, api, download)
    assert (row["route"], row["path"], row["status"]) == ("media/{token}", "/api/v1/media/<token>", 200)
    token = link["url"].rpartition("/")[2]
    assert log_rows(worker, "path like ?", f"%{token}%") == []


def curl_download(worker: WorkerProcess, url: str) -> None:
    """Download as curl does: it closes its connection the moment it has the
    Content-Length's bytes."""
    command = ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}", "-H", f"Authorization: Bearer {worker.key}"]
    done = subprocess.run([*command, worker.base_url + url], capture_output=True, text=True, timeout=30)
    assert done.stdout == "2000000", done


def test_a_download_whose_client_closes_at_its_last_byte_is_logged_with_its_status(api, worker):
    # The stream still claims the link after its last byte, when curl may be gone.
    for _ in range(3):
        url = api.get("/main/plugin/testing/media", params={"size": 2_000_000}).json()["media"]["url"]

        def download(url: str = url) -> None:
            curl_download(worker, url)
            # curl has every byte before the stream has ended on the worker: wait for its row.
            wait_until(lambda: activity(api)["requests_in_flight"] == 0, timeout=10, what="the download to end")

        rows = logged_between(worker, api, download)
        assert [(row["route"], row["status"]) for row in rows] == [("media/{token}", 200)]


def test_a_download_cut_short_stops_counting_and_is_logged_499(api, worker):
    link = api.get("/main/plugin/testing/media", params={"size": 20_000_000}).json()["media"]

    def cut_short():
        with worker.client() as client, client.stream("GET", worker.base_url + link["url"]) as response:
            assert response.status_code == 200
            next(response.iter_raw())  # some bytes, then the client goes away
        wait_until(lambda: activity(api)["requests_in_flight"] == 0, timeout=10, what="the download to stop counting")

    (row,) = logged_between(worker, api, cut_short)
    assert (row["route"], row["status"]) == ("media/{token}", 499)
    # Not used up: the link still works.
    assert len(api.get(worker.base_url + link["url"]).content) == 20_000_000


def test_a_client_that_goes_away_is_logged_499(api, worker):
    def impatient():
        with worker.client(timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
            client.get("/main/plugin/testing/sleep", params={"seconds": 1.5})
        # The call runs to its end; the page is free after it.
        wait_until(lambda: not api.get("/main").json()["busy"], timeout=10, what="the page to be free")

    rows = logged_between(worker, api, impatient)
    sleeps = [r for r in rows if r["route"] == "plugin/testing/sleep"]
    assert [r["status"] for r in sleeps] == [499]


def test_a_job_start_logs_its_202_and_its_polls_log_nothing(api, worker):
    job = {}

    def start_and_poll():
        started = api.get("/main/plugin/testing/sleep", params={"seconds": 0.2}, headers={"X-Result-Ttl": "60"})
        assert started.status_code == 202, started.text
        job["id"] = started.json()["job_id"]
        wait_until(lambda: api.get(f"/jobs/{job['id']}").json()["state"] == "done", timeout=10, what="the job's end")

    rows = [r for r in logged_between(worker, api, start_and_poll) if r["kind"] == "http"]
    assert [(r["route"], r["status"], r["page_id"]) for r in rows] == [("plugin/testing/sleep", 202, "main")]


def test_old_rows_are_swept(make_worker):
    worker = make_worker({"REQUEST_LOG_RETENTION_S": "1", "SWEEP_S": "0.2", "REQUEST_LOG_FLUSH_S": "0.05"})
    with worker.client() as api:
        api.get("/pages")
        wait_until(lambda: log_rows(worker, "route = 'pages'"), timeout=10, what="the row to be written")
        wait_until(lambda: not log_rows(worker, "route = 'pages'"), timeout=10, what="the row to be swept")


def test_rows_in_the_buffer_are_written_at_a_clean_stop(make_worker):
    # A flush interval far beyond the test: only the stop writes the rows.
    worker = make_worker({"REQUEST_LOG_FLUSH_S": "3600"})
    with worker.client() as api:
        for _ in range(3):
            assert api.get("/pages").status_code == 200
    assert log_rows(worker, "route = 'pages'") == []
    assert worker.stop() == 0
    assert len(log_rows(worker, "route = 'pages'")) == 3


def test_the_log_can_be_switched_off(make_worker):
    worker = make_worker({"REQUEST_LOG": "0"})
    with worker.client() as api:
        api.get("/pages")
        assert api.get("/workload").json()["routes"] == []
    assert worker.stop() == 0
    assert log_rows(worker) == []


# --- activity ------------------------------------------------------------------------


async def test_activity_counts_a_call_while_it_runs(worker):
    async with worker.async_client() as client:
        call = asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 2}))
        during = await until(client, "/activity", lambda a: a["requests_in_flight"] >= 1 and "main" in a["busy_pages"])
        assert during["idle_seconds"] == 0
        assert (await call).status_code == 200
        after = await until(client, "/activity", lambda a: a["requests_in_flight"] == 0)
    assert after["busy_pages"] == []
    assert after["jobs_in_flight"] == 0 and after["webhooks_pending"] == 0


async def test_activity_counts_a_job_while_it_runs(worker):
    async with worker.async_client() as client:
        started = await client.get("/main/plugin/testing/sleep", params={"seconds": 1.5}, headers={"X-Result-Ttl": "60"})
        assert started.status_code == 202, started.text
        during = await until(client, "/activity", lambda a: a["jobs_in_flight"] >= 1)
        assert during["idle_seconds"] == 0 and "main" in during["busy_pages"]
        await until(client, "/activity", lambda a: a["jobs_in_flight"] == 0 and not a["busy_pages"])


def test_idle_seconds_grow_and_only_client_requests_reset_them(api):
    first = activity(api)
    assert first["requests_in_flight"] == 0
    # Reading activity, workload and health again and again is not client activity.
    def grown():
        api.get("/workload")
        api.get("/health")
        now = activity(api)
        return now if now["idle_seconds"] >= first["idle_seconds"] + 0.3 else None

    later = wait_until(grown, timeout=10, what="idle_seconds to grow")
    assert later["last_activity_at"] == first["last_activity_at"]
    # A poll is client activity, even for an unknown job.
    assert api.get("/jobs/unknown-job").status_code == 404
    after_poll = activity(api)
    assert after_poll["idle_seconds"] < later["idle_seconds"]
    assert after_poll["last_activity_at"] > later["last_activity_at"]


async def test_the_activity_reads_the_job_counts_it_is_given(settings, request_factory):
    settings.PENELOPE_KEY = "in-process-key"

    async def counts() -> tuple[int, int]:
        return 2, 1

    view = ActivityView.as_view(job_counts=counts)
    response = await view(request_factory.get("/api/v1/activity", headers={"Authorization": "Bearer in-process-key"}))
    body = json.loads(response.content)
    assert (body["jobs_in_flight"], body["webhooks_pending"], body["idle_seconds"]) == (2, 1, 0.0)


# --- the workload --------------------------------------------------------------------


def test_the_workload_summarises_the_log_per_route(make_worker):
    worker = make_worker()
    with worker.client() as api:
        for seconds in (0.1, 0.2, 0.3):
            api.get("/main/plugin/testing/sleep", params={"seconds": seconds})
        api.get("/main/plugin/testing/refuse")
        api.get("/main/plugin/testing/refuse")
        started = api.get("/main/plugin/testing/sleep", params={"seconds": 0}, headers={"X-Result-Ttl": "60"})
        assert started.status_code == 202
        job_id = started.json()["job_id"]
        wait_until(lambda: api.get(f"/jobs/{job_id}").json()["state"] == "done", timeout=10, what="the job's end")
        body = api.get("/workload", params={"window_s": "600"}).json()
    assert body["success"] is True and body["window_s"] == 600
    assert body["until"] - body["since"] == pytest.approx(600, abs=0.01)
    routes = {(r["route"], r["kind"]): r for r in body["routes"]}
    sleep = routes[("plugin/testing/sleep", "http")]
    # The job's 202 is not counted as work; the three plain sleeps are.
    assert sleep["count"] == 3 and sleep["statuses"] == {"200": 3}
    assert 200 <= sleep["duration_ms"]["p50"] <= sleep["duration_ms"]["p95"] <= sleep["duration_ms"]["max"]
    assert sleep["duration_ms"]["max"] >= 300
    assert routes[("plugin/testing/refuse", "http")]["statuses"] == {"418": 2}
    assert body["requests"] == sum(r["count"] for r in body["routes"] if r["kind"] == "http")
    assert ("{job_id}", "http") not in routes and ("jobs/{job_id}", "http") not in routes


@pytest.mark.parametrize("window_s", ["0", "-5", "nan", "inf", "-inf", "abc", "", "1e999"])
def test_a_bad_window_answers_400(api, window_s):
    response = api.get("/workload", params={"window_s": window_s})
    assert response.status_code == 400, response.text
    assert response.json() == {
        "success": False, "page_id": None, "error": "Invalid parameter 'window_s': a number of seconds, more than 0.",
    }


def test_the_workload_window_stops_at_the_log_retention(api):
    week = 7 * 24 * 3600  # REQUEST_LOG_RETENTION_S by default
    assert api.get("/workload", params={"window_s": str(week)}).status_code == 200
    response = api.get("/workload", params={"window_s": str(week + 1)})
    assert response.status_code == 400
    assert response.json()["error"] == (
        "Invalid parameter 'window_s': at most 604800 seconds, as long as the log keeps its rows (REQUEST_LOG_RETENTION_S)."
    )


def test_the_workload_window_defaults_to_an_hour(api):
    body = api.get("/workload").json()
    assert body["window_s"] == 3600


@pytest.mark.django_db(transaction=True)
def test_workload_arithmetic_counts_jobs_and_skips_their_202():
    now = time.time()
    buffer = request_log.RequestLog()

    def http(route: str, status: int, ms: float, age_s: float = 10, method: str = "GET") -> None:
        buffer.record(
            method=method, route=route, path="/api/v1/main/" + route, page_id="main",
            status=status, started_at=now - age_s, duration_ms=ms,
        )

    for ms in range(1, 101):  # 1..100 ms
        http("plugin/web/open", 200, float(ms))
    http("plugin/web/open", 502, 1000.0)
    http("plugin/web/open", 202, 3.0)  # a job's start: not work
    http("pages", 202, 5.0)  # a 202 outside the plugin routes is counted
    http("pages", 200, 1.0, age_s=7200)  # outside the window
    job = {"family": "web", "action": "open", "page_id": "main", "job_id": "j1"}
    buffer.record_job(**job, started_at=now - 45)  # the job's start row
    buffer.record_job(**job, status=200, started_at=now - 45, duration_ms=40_000)  # and its end row
    assert buffer.flush() == 106
    assert RequestLogEntry.objects.count() == 106

    body = request_log.workload(window_s=3600, now=now)
    routes = {(r["route"], r["kind"]): r for r in body["routes"]}
    opened = routes[("plugin/web/open", "http")]
    assert opened["count"] == 101
    assert opened["statuses"] == {"200": 100, "502": 1}
    assert opened["duration_ms"] == {"p50": 51.0, "p95": 96.0, "max": 1000.0}
    job = routes[("plugin/web/open", "job")]
    assert job["count"] == 1 and job["statuses"] == {"200": 1} and job["duration_ms"]["max"] == 40_000
    assert routes[("pages", "http")]["count"] == 1
    assert (body["requests"], body["jobs"]) == (102, 1)
    assert request_log.workload(window_s=1, now=now)["routes"] == []


@pytest.mark.django_db(transaction=True)
def test_sweep_deletes_rows_past_the_retention(settings):
    settings.REQUEST_LOG_RETENTION_S = 100
    now = time.time()
    buffer = request_log.RequestLog()
    for age in (10, 99, 101, 5000):
        buffer.record(
            method="GET", route="pages", path="/api/v1/pages", page_id=None, status=200,
            started_at=now - age, duration_ms=1,
        )
    buffer.flush()
    assert request_log.sweep_request_log(now) == 2
    assert sorted(round(now - t) for t in RequestLogEntry.objects.values_list("started_at", flat=True)) == [10, 99]


# --- the memory purge --------------------------------------------------------------------


def test_purge_skip_rules():
    def page(name: str = "p") -> ManagedPage:
        return ManagedPage(name, tab=None)

    with_job = page()
    with_job.job_id = "j"
    assert skip_reason(with_job) == "job"
    waited_on = page()
    loop = asyncio.new_event_loop()
    try:
        waited_on.line.push(Waiter("p", (0, 0), loop.create_future()))  # a plain call waits in its line
        assert waited_on.waiting == 1 and skip_reason(waited_on) == "busy"
    finally:
        loop.close()
    leased = page()
    leased.lease = Lease(id="l", ttl=60, expires_at=time.monotonic() + 60)  # as the broker keeps it
    assert skip_reason(leased) == "leased"
    leased.lease = None  # ended by the broker's timer
    assert skip_reason(leased) == "closed"  # no tab: nothing to purge either


async def test_purge_locked_page_is_busy():
    locked = ManagedPage("p", tab=None, held=True)
    assert skip_reason(locked) == "busy"


async def test_purge_skips_pages_in_use_and_keeps_what_idle_pages_show(make_worker, site):
    worker = make_worker({"MAX_PAGES": "4", "PURGE_S": "1"})
    async with worker.async_client() as client:
        for name in ("p-busy", "p-leased", "p-job"):
            assert (await client.post("/pages", json={"page_id": name})).status_code == 201
        opened = await client.get("/main/plugin/web/open", params={"url": site.url + "/index.html"})
        assert opened.status_code == 200
        await client.post("/main/primitive/fill", json={"selector": "#name", "value": "kept across the purge"})
        lease = (await client.post("/p-leased/lease", json={"ttl": 60})).json()["lease"]
        job = await client.get("/p-job/plugin/testing/sleep", params={"seconds": 5}, headers={"X-Result-Ttl": "60"})
        assert job.status_code == 202
        busy = asyncio.create_task(client.get("/p-busy/plugin/testing/sleep", params={"seconds": 5}))
        await until(client, "/p-busy", lambda s: s["busy"])

        response = await client.post("/purge")
        assert response.status_code == 200, response.text
        report = response.json()
        assert report["purged"] == ["main"]
        assert sorted(report["skipped"], key=lambda s: s["page_id"]) == [
            {"page_id": "p-busy", "reason": "busy"},
            {"page_id": "p-job", "reason": "job"},
            {"page_id": "p-leased", "reason": "leased"},
        ]
        assert report["browser_caches_cleared"] is False  # pages were in use
        assert report["memory_before"]["rss_bytes"] > 0 and report["memory_after"]["rss_bytes"] > 0
        assert report["freed_bytes"] == report["memory_before"]["rss_bytes"] - report["memory_after"]["rss_bytes"]

        # What main shows is unchanged: the same document, title and typed text.
        state = (await client.get("/main/plugin/web/state")).json()
        assert (state["url"], state["title"]) == (site.url + "/index.html", "Test home")
        typed = await client.post("/main/primitive/evaluate", json={"expression": "document.getElementById('name').value"})
        assert typed.json()["value"] == "kept across the purge"

        assert (await busy).status_code == 200
        await client.delete("/p-leased/lease", headers={"X-Lease": lease})
        await until(client, "/p-job", lambda s: s["job_id"] is None)

        # Every page idle: every page purged, and the browser-wide caches too.
        everything = (await client.post("/purge")).json()
        assert sorted(everything["purged"]) == ["main", "p-busy", "p-job", "p-leased"]
        assert everything["skipped"] == [] and everything["browser_caches_cleared"] is True
        typed = await client.post("/main/primitive/evaluate", json={"expression": "document.getElementById('name').value"})
        assert typed.json()["value"] == "kept across the purge"
        assert (await client.get("/purge")).status_code == 405
    # The loop runs every PURGE_S.
    wait_until(lambda: "memory purge: purged" in worker.log(), timeout=15, what="the purge loop to run")


# --- the admin -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_shows_the_log_read_only(client):
    User.objects.create_superuser("operator", "op@example.com", "pw")
    client.login(username="operator", password="pw")
    RequestLogEntry.objects.create(
        started_at=time.time(), method="GET", route="plugin/web/open", path="/api/v1/main/plugin/web/open",
        page_id="main", status=200, duration_ms=12.5,
    )
    listing = client.get("/admin/activity/requestlogentry/?kind__exact=http")
    assert listing.status_code == 200 and b"plugin/web/open" in listing.content
    assert client.get("/admin/activity/requestlogentry/add/").status_code == 403
