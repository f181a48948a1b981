"""The fleet console on a real waker with three personas: `steady` (always),
`dozer` (sleepy, asleep: woken once to leave work in its store, then
stopped) and `busy` (sleepy, awake, with a running job, a queued one and a
failed one). A real Chromium signs in and reads the pages; each figure is
compared with the worker's own API, and `dozer` is never woken by any of it."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from harness.waker import WakerProcess
from harness.worker import ROOT, wait_until
from tests.conftest import worker_env

# The client is its own package, tested from the checkout (tests/test_client.py).
sys.path.insert(0, str(ROOT / "client"))

from penelope_client import AsyncWaker, Waker  # noqa: E402
from penelope_client.errors import Refused, Unauthorized  # noqa: E402

REFUSAL_S = 0.4
ENV = {
    "WAKER_POLL_S": "0.2", "WAKER_MEMORY_EVERY_S": "0", "CONSOLE_REFUSAL_S": str(REFUSAL_S),
    "CONSOLE_REFRESH_S": "0.3",
}
FAR_CRON = "0 3 1 1 *"  # 1 January, 03:00: never due while the suite runs


def start_job(api: httpx.Client, page: str, plugin: str, body: dict, **headers: str) -> dict:
    sent = {"X-Result-Ttl": "600", **{name.replace("_", "-"): value for name, value in headers.items()}}
    answer = api.post(f"/{page}/plugin/{plugin}", json=body, headers=sent)
    assert answer.status_code == 202, answer.text
    return answer.json()


def ended(api: httpx.Client, job_id: str) -> dict:
    return wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}").json())["state"] not in ("queued", "running") and body,
        what=f"job {job_id} to end",
    )


def add_schedule(api: httpx.Client, name: str) -> dict:
    body = {"name": name, "cron": FAR_CRON, "page_id": "main", "plugin": "testing/sleep", "params": {"seconds": 0}, "result_ttl": 60}
    answer = api.post("/schedules", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


class Fleet:
    """The waker and what the module left in each persona."""

    def __init__(self, waker: WakerProcess):
        self.waker = waker
        self.jobs: dict[str, str] = {}
        self.schedules: dict[str, dict] = {}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    waker = WakerProcess(
        tmp_path_factory.mktemp("console"),
        [
            {"name": "steady", "mode": "always", "env": worker_env()},
            {"name": "dozer", "mode": "sleepy", "idle_timeout_s": 600, "env": worker_env()},
            {"name": "busy", "mode": "sleepy", "idle_timeout_s": 600, "env": worker_env(MAX_PAGES="1", CANCEL_GRACE_S="0.5")},
        ],
        env=ENV,
    ).start()
    made = Fleet(waker)
    try:
        waker.start_persona("dozer")
        with waker.direct("dozer") as api:
            made.jobs["dozer_failed"] = start_job(api, "main", "testing/refuse", {})["job_id"]
            ended(api, made.jobs["dozer_failed"])
            made.schedules["dozer"] = add_schedule(api, "yearly")
        with waker.client() as api:
            assert api.post("/personas/dozer/stop", json={}).status_code == 200
        waker.start_persona("busy")
        with waker.direct("busy") as api:
            made.jobs["busy_failed"] = start_job(api, "main", "testing/refuse", {})["job_id"]
            ended(api, made.jobs["busy_failed"])
            made.jobs["busy_running"] = start_job(api, "main", "testing/sleep", {"seconds": 120})["job_id"]
            made.jobs["busy_queued"] = start_job(
                api, "main", "testing/sleep", {"seconds": 0}, X_Queue_Timeout="600"
            )["job_id"]
        waker.wait_for("steady", lambda body: body["state"] == "running", timeout=60)
        with waker.direct("steady") as api:
            made.schedules["steady"] = add_schedule(api, "steady-yearly")
        yield made
    finally:
        assert waker.stop() == [], "workers outlived their waker"


def signed_in(waker: WakerProcess) -> httpx.Client:
    client = httpx.Client(base_url=waker.base_url, follow_redirects=False, timeout=60)
    answer = client.post("/console/sign-in", data={"key": waker.key, "next": "/console/"})
    assert answer.status_code == 302 and answer.headers["location"] == "/console/", answer.text
    return client


@pytest.fixture
def console(fleet: Fleet) -> Iterator[httpx.Client]:
    client = signed_in(fleet.waker)
    yield client
    client.close()


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


def dozer_still_asleep(fleet: Fleet) -> None:
    assert fleet.waker.persona("dozer")["state"] == "stopped"
    assert fleet.waker.workers("dozer") == []


def test_the_fleet_page_agrees_with_each_worker_s_own_api_and_never_wakes_the_sleeper(fleet, person):
    waker = fleet.waker
    page = person.new_page()
    try:
        page.goto(waker.base_url + "/console/")
        assert page.url.startswith(waker.base_url + "/console/sign-in")
        page.fill("input[name=key]", waker.key)
        page.click("button[type=submit]")
        page.wait_for_selector("#fleet-rows tr[data-persona]")

        def cell(name: str, field: str) -> str:
            return page.inner_text(f'tr[data-persona="{name}"] [data-field="{field}"]').strip()

        assert cell("dozer", "state") == "asleep" and cell("busy", "state") == "awake"
        wait_until(lambda: cell("steady", "state") == "awake", what="steady to show awake")
        with waker.direct("busy") as api:
            running = api.get("/jobs", params={"state": "running"}).json()["jobs"]
            queued = api.get("/jobs", params={"state": "queued"}).json()["jobs"]
            done = api.get("/jobs", params={"state": "done"}).json()["jobs"]
            activity = api.get("/activity").json()
        failed = [job for job in done if job["status"] >= 400]
        assert (len(running), len(queued), len(failed)) == (1, 1, 1)
        assert cell("busy", "jobs_running") == "1" and cell("busy", "jobs_queued") == "1"
        assert cell("busy", "failed_hour") == cell("busy", "failed_day") == "1"
        assert cell("busy", "pages_busy") == str(len(activity["busy_pages"])) == "1"
        assert cell("busy", "pages_open") == str(len(activity["open_pages"]))
        assert cell("busy", "memory").endswith("MB")
        # The sleeper's figures are its store's: one failed job, its schedule's next fire.
        assert cell("dozer", "failed_day") == "1" and cell("dozer", "jobs_queued") == "0"
        fire = float(page.get_attribute('tr[data-persona="dozer"] [data-field="next_fire"]', "data-epoch"))
        assert fire == pytest.approx(fleet.schedules["dozer"]["next_fire_at"], abs=0.01)
        steady_fire = page.get_attribute('tr[data-persona="steady"] [data-field="next_fire"]', "data-epoch")
        assert float(steady_fire) == pytest.approx(fleet.schedules["steady"]["next_fire_at"], abs=0.01)
        for name in ("steady", "dozer", "busy"):  # each row's sparkline: a point an hour
            assert page.get_attribute(f'tr[data-persona="{name}"] svg.spark', "data-points") == "24"
            assert page.get_attribute(f'tr[data-persona="{name}"] svg.spark polyline', "points").count(",") == 24

        # A persona's page draws its charts: a point a minute over the last hour.
        page.goto(waker.base_url + "/console/p/busy/")
        calls = page.locator('[data-chart="Calls"] [data-series="calls_failed"]')
        assert calls.get_attribute("data-points") == "60"
        assert len(calls.locator("polyline").first.get_attribute("points").split()) == 60
        memory = page.locator('[data-chart="Memory charged (peak)"] .series :is(polyline, circle)')
        assert memory.count() >= 1  # a line, or a dot for one reading
        queue = page.inner_text('[data-chart="Queue depth"] .legend')
        assert "latest minute: 1" in queue and "highest in the last hour" in queue  # the job queued now
        page.goto(waker.base_url + "/console/p/busy/?scale=hour")
        assert page.get_attribute('[data-chart="Jobs"] [data-series="jobs_failed"]', "data-points") == "24"
        assert fleet.jobs["busy_failed"] in page.inner_text("table.jobs")
        assert "refuses" in page.inner_text(f'tr[data-job="{fleet.jobs["busy_failed"]}"] .error-line')
        page.goto(waker.base_url + "/console/p/dozer/")
        assert page.inner_text('[data-field="state"]') == "asleep"
        assert fleet.schedules["dozer"]["schedule_id"] in page.inner_html("table.schedules")
    finally:
        page.close()
    dozer_still_asleep(fleet)


def test_the_fleet_page_refreshes_itself_without_a_reload(fleet, person):
    waker = fleet.waker
    page = person.new_page()
    try:
        page.goto(waker.base_url + "/console/sign-in")
        page.fill("input[name=key]", waker.key)
        page.click("button[type=submit]")
        page.wait_for_selector('tr[data-persona="busy"]')
        page.evaluate("window.notReloaded = true")
        before = page.inner_text('tr[data-persona="busy"] [data-field="jobs_queued"]')
        with waker.direct("busy") as api:
            extra = start_job(api, "main", "testing/sleep", {"seconds": 0}, X_Queue_Timeout="600")["job_id"]
        queued_cell = 'tr[data-persona="busy"] [data-field="jobs_queued"]'
        wait_until(lambda: page.inner_text(queued_cell).strip() == str(int(before) + 1), what="the row to refresh")
        assert page.evaluate("window.notReloaded") is True
        with waker.direct("busy") as api:
            assert api.post(f"/jobs/{extra}/cancel").status_code == 200
    finally:
        page.close()


def test_the_fleet_sorts_and_filters_by_state_and_name(console):
    names = lambda html: re.findall(r'<tr data-persona="([a-z]+)"', html)  # noqa: E731
    assert names(console.get("/console/").text) == ["busy", "dozer", "steady"]
    assert names(console.get("/console/?sort=name&dir=desc").text) == ["steady", "dozer", "busy"]
    assert names(console.get("/console/?state=asleep").text) == ["dozer"]
    assert names(console.get("/console/?q=EA").text) == ["steady"]
    assert names(console.get("/console/?sort=queued&dir=desc").text)[0] == "busy"
    rows = console.get("/console/?fragment=rows&state=awake").text
    assert "<html" not in rows and set(names(rows)) == {"busy", "steady"}


def test_the_fleet_job_search_finds_known_jobs_awake_and_asleep(fleet):
    waker = fleet.waker
    with httpx.Client(base_url=waker.base_url + "/api/v1", headers={"Authorization": f"Bearer {waker.key}"}) as api:
        by_id = api.get("/fleet/jobs", params={"job_id": fleet.jobs["dozer_failed"]}).json()
        assert [(job["persona"], job["id"], job["status"]) for job in by_id["jobs"]] == [
            ("dozer", fleet.jobs["dozer_failed"], 418)
        ]
        refused = api.get("/fleet/jobs", params={"plugin": "testing/refuse"}).json()["jobs"]
        assert {job["id"] for job in refused} == {fleet.jobs["dozer_failed"], fleet.jobs["busy_failed"]}
        assert all(job["error"] == "The testing plugin refuses." for job in refused)
        queued = api.get("/fleet/jobs", params={"state": "queued", "persona": "busy"}).json()["jobs"]
        assert fleet.jobs["busy_queued"] in {job["id"] for job in queued}
        everything = api.get("/fleet/jobs").json()["jobs"]
        accepted = [job["accepted_at"] for job in everything]
        assert accepted == sorted(accepted, reverse=True)
        cut = next(job for job in everything if job["id"] == fleet.jobs["busy_running"])["accepted_at"]
        older = api.get("/fleet/jobs", params={"until": str(cut)}).json()["jobs"]
        assert fleet.jobs["busy_running"] not in {job["id"] for job in older}
        assert {fleet.jobs["dozer_failed"], fleet.jobs["busy_failed"]} <= {job["id"] for job in older}
        newer = api.get("/fleet/jobs", params={"since": str(cut), "persona": "busy,dozer"}).json()["jobs"]
        assert fleet.jobs["busy_running"] in {job["id"] for job in newer} and fleet.jobs["dozer_failed"] not in {
            job["id"] for job in newer
        }
        for params, said in (
            ({"colour": "red"}, "Unknown parameter 'colour'"),
            ({"state": "sleeping"}, "Invalid parameter 'state'"),
            ({"since": "yesterday"}, "Invalid parameter 'since'"),
            ({"persona": "nobody"}, "no persona nobody"),
            ({"limit": "0"}, "Invalid parameter 'limit'"),
        ):
            answer = api.get("/fleet/jobs", params=params)
            assert answer.status_code == 400 and said in answer.json()["error"], answer.text
    assert httpx.get(waker.base_url + "/api/v1/fleet/jobs").status_code == 401
    dozer_still_asleep(fleet)


def audit_lines(fleet: Fleet) -> list[dict]:
    path = fleet.waker.directory / "console-audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def confirmed(console: httpx.Client, name: str, action: str, target: str | None = None, **extra: str) -> httpx.Response:
    """Ask, read the confirmation, then confirm with the form's own fields."""
    asked = console.get(f"/console/p/{name}/act", params={"action": action, **({"target": target} if target else {})})
    assert asked.status_code == 200 and "<form method=\"post\"" in asked.text, asked.text
    form = {"csrf": csrf_of(asked.text), "action": action, "confirm": "yes", **({"target": target} if target else {})}
    return console.post(f"/console/p/{name}/act", data={**form, **extra})


def test_every_action_is_confirmed_refused_without_its_csrf_token_and_audited(fleet, console):
    waker = fleet.waker
    schedule = fleet.schedules["steady"]["schedule_id"]
    queued = fleet.jobs["busy_queued"]
    session_csrf = csrf_of(console.get("/console/p/busy/").text)
    # Without the form's token, or with another's, nothing happens and nothing is audited.
    for action, name, target in (("cancel", "busy", queued), ("pause", "steady", schedule), ("stop", "busy", None)):
        for token in ("", "0" * 64):
            answer = console.post(
                f"/console/p/{name}/act", data={"action": action, "target": target or "", "confirm": "yes", "csrf": token}
            )
            assert answer.status_code == 403, answer.text
    assert audit_lines(fleet) == []
    # Unconfirmed: refused too.
    answer = console.post("/console/p/busy/act", data={"action": "cancel", "target": queued, "csrf": session_csrf})
    assert answer.status_code == 400 and audit_lines(fleet) == []
    with waker.direct("busy") as api:
        assert api.get(f"/jobs/{queued}").json()["state"] == "queued"

    assert confirmed(console, "busy", "cancel", queued).status_code == 200
    with waker.direct("busy") as api:
        assert api.get(f"/jobs/{queued}").json()["state"] == "cancelled"
    assert confirmed(console, "steady", "pause", schedule).status_code == 200
    with waker.direct("steady") as api:
        assert api.get(f"/schedules/{schedule}").json()["paused"] is True
    assert confirmed(console, "steady", "resume", schedule).status_code == 200
    # A stop under work is refused unless forced, and the refusal is audited too.
    refused = confirmed(console, "busy", "stop")
    assert refused.status_code == 409 and "work in flight" in refused.text
    assert waker.persona("busy")["state"] == "running"
    # A live view of a page: no confirmation, a redirect to the live page through /w/.
    page_csrf = csrf_of(console.get("/console/p/steady/").text)
    watched = console.post("/console/p/steady/act", data={"action": "watch", "target": "main", "csrf": page_csrf})
    assert watched.status_code == 302 and watched.headers["location"].startswith("/w/steady/live/")
    assert httpx.get(waker.base_url + watched.headers["location"]).status_code == 200

    lines = audit_lines(fleet)
    assert [(line["action"], line["persona"], line["target"], line["outcome"]) for line in lines] == [
        ("cancel", "busy", queued, "done"),
        ("pause", "steady", schedule, "done"),
        ("resume", "steady", schedule, "done"),
        ("stop", "busy", None, "refused"),
        ("watch", "steady", "main", "done"),
    ]
    assert all(line["who"].startswith("session ") and line["address"] == "127.0.0.1" for line in lines)
    shown = console.get("/console/p/steady/").text
    assert 'data-audit="pause"' in shown and 'data-audit="resume"' in shown
    assert "console: session" in waker.log()
    dozer_still_asleep(fleet)


def test_stop_and_start_from_the_console(fleet, console):
    waker = fleet.waker
    assert confirmed(console, "steady", "stop", force="yes").status_code == 200
    assert waker.persona("steady")["state"] == "stopped"
    row = console.get("/console/?q=steady").text
    assert 'data-state="asleep"' in row and "stopped by an operator" in row
    assert confirmed(console, "steady", "start").status_code == 200
    assert waker.persona("steady")["state"] == "running"
    assert [line["action"] for line in audit_lines(fleet)][-2:] == ["stop", "start"]


def test_a_wrong_key_is_refused_slowly_and_one_guess_at_a_time(fleet):
    waker = fleet.waker
    url = waker.base_url + "/console/sign-in"
    began = time.monotonic()
    answer = httpx.post(url, data={"key": "guess"})
    assert answer.status_code == 403 and "penelope_console" not in answer.headers.get("set-cookie", "")
    assert time.monotonic() - began >= REFUSAL_S
    # Three guesses at once from one address wait their turns.
    finished: list[float] = []
    began = time.monotonic()

    def guess() -> None:
        assert httpx.post(url, data={"key": "guess"}).status_code == 403
        finished.append(time.monotonic() - began)

    threads = [threading.Thread(target=guess) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(finished) >= 3 * REFUSAL_S
    bearer = httpx.get(waker.base_url + "/console/", headers={"Authorization": "Bearer guess"})
    assert bearer.status_code == 401
    assert httpx.get(waker.base_url + "/console/", headers={"Authorization": f"Bearer {waker.key}"}).status_code == 200
    # A forged or unsigned cookie is no session.
    forged = httpx.get(waker.base_url + "/console/", cookies={"penelope_console": "abc:def:ghi"})
    assert forged.status_code == 302 and forged.headers["location"].startswith("/console/sign-in")


def test_the_session_cookie_is_http_only_strict_expiring_and_signed_out(fleet):
    waker = fleet.waker
    with httpx.Client(base_url=waker.base_url, follow_redirects=False, timeout=60) as client:
        answer = client.post("/console/sign-in", data={"key": waker.key, "next": "https://elsewhere.example/"})
        assert answer.headers["location"] == "/console/"
        cookie = answer.headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=Strict", "Max-Age=", "Path=/console/"):
            assert attribute in cookie
        assert waker.key not in cookie
        token = csrf_of(client.get("/console/").text)
        assert client.post("/console/sign-out", data={"csrf": "0" * 64}).status_code == 403
        out = client.post("/console/sign-out", data={"csrf": token})
        assert out.status_code == 302 and 'penelope_console=""' in out.headers["set-cookie"]


def test_no_page_or_script_shows_a_key(fleet, console):
    waker = fleet.waker
    keys = [waker.key, *(waker.worker_key(name) for name in ("steady", "dozer", "busy"))]
    paths = [
        "/console/", "/console/?fragment=rows", "/console/jobs?plugin=testing/refuse", "/console/p/busy/",
        "/console/p/dozer/?scale=hour", "/console/p/steady/act?action=stop", "/console/sign-in",
        "/console/static/console.js", "/console/static/console.css", "/console/p/busy/metrics",
    ]
    for path in paths:
        answer = console.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        assert not [key for key in keys if key in answer.text], path
        if "static" not in path:
            assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert "penelope_" in console.get("/console/p/busy/metrics").text  # the worker's own metrics, read for the operator
    assert console.get("/console/p/dozer/metrics").status_code == 503  # asleep: not woken for it
    dozer_still_asleep(fleet)


def test_the_python_client_searches_the_fleet(fleet):
    waker = fleet.waker
    with Waker(waker.base_url, waker.key) as wake:
        found = wake.fleet_jobs(plugin="testing/refuse", state="done")
        assert {(job["persona"], job["id"]) for job in found["jobs"]} == {
            ("dozer", fleet.jobs["dozer_failed"]), ("busy", fleet.jobs["busy_failed"])
        }
        assert wake.fleet_jobs(job_id=fleet.jobs["busy_running"], personas=["busy"])["count"] == 1
        assert wake.fleet_jobs(since=datetime(2100, 1, 1, tzinfo=UTC))["jobs"] == []
        assert wake.fleet_jobs(until=0.0, limit=5)["jobs"] == []
        with pytest.raises(Refused, match="Invalid parameter 'state'"):
            wake.fleet_jobs(state="sleeping")
    with Waker(waker.base_url, "not-the-key") as stranger, pytest.raises(Unauthorized):
        stranger.fleet_jobs()

    async def searched() -> dict:
        async with AsyncWaker(waker.base_url, waker.key) as wake:
            return await wake.fleet_jobs(personas=["dozer"])

    # In a thread of its own: this one runs the sync Playwright's loop (the `person` fixture).
    found: dict = {}
    searcher = threading.Thread(target=lambda: found.update(asyncio.run(searched())))
    searcher.start()
    searcher.join()
    assert [job["id"] for job in found["jobs"]] == [fleet.jobs["dozer_failed"]]
    dozer_still_asleep(fleet)
