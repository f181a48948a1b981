"""The browser dies, the worker lives: faults injected into a real worker's
real Chromium (its main process and its renderers killed with SIGKILL, its
launch broken), and what every client then sees."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from pathlib import Path

import httpx

from harness.receiver import Receiver
from harness.waker import WakerProcess
from harness.worker import wait_until
from tests.support import browser_soak
from tests.support.faults import ChromiumWrapper, browser_pids, kill_browser, kill_renderers

FAST_RELAUNCH = {"BROWSER_RELAUNCH_S": "0.2", "PAGE_WAIT_S": "30", "WEBHOOK_ATTEMPTS_S": "0,0.5,1,1.5"}
BROWSER_STOPPED = "The browser stopped during the call; it is being launched again."


def health(worker) -> httpx.Response:
    return httpx.get(worker.base_url + "/api/v1/health", timeout=5)


def until_healthy(worker, timeout: float = 30) -> list[dict]:
    """Read health until it answers 200; answers every 503 body seen on the way."""
    unhealthy: list[dict] = []

    def up() -> bool:
        answer = health(worker)
        if answer.status_code == 503:
            unhealthy.append(answer.json())
        return answer.status_code == 200

    wait_until(up, timeout=timeout, what="health to answer 200 again")
    return unhealthy


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    """Run a blocking call in a thread; its answer lands in the dict under `answer`."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("answer", fn(*args, **kwargs)), daemon=True)
    thread.start()
    return thread, out


def page_state(api: httpx.Client, page_id: str) -> dict:
    return api.get(f"/{page_id}").json()


def until_busy(api: httpx.Client, page_id: str) -> None:
    wait_until(lambda: page_state(api, page_id)["busy"], timeout=10, what=f"page {page_id} to be busy")


def metric(api: httpx.Client, name: str) -> float:
    text = api.get("/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def set_cookie(api: httpx.Client, site_url: str, value: str) -> None:
    cookie = {"name": "persona", "value": value, "url": site_url, "expires": time.time() + 3600}
    answer = api.post("/main/plugin/web/cookies", json={"op": "set", "cookies": [cookie]})
    assert answer.status_code == 200, answer.text


def cookie_value(api: httpx.Client, site_url: str) -> str | None:
    answer = api.post("/main/plugin/web/cookies", json={"op": "list", "url": site_url, "name": "persona"})
    assert answer.status_code == 200, answer.text
    found = answer.json()["cookies"]
    return found[0]["value"] if found else None


def test_a_browser_killed_under_a_plain_call_answers_502_and_comes_back_with_its_profile_and_leases(make_worker, site):
    worker = make_worker(FAST_RELAUNCH)
    with worker.client() as api:
        set_cookie(api, site.url, "kept")
        assert api.post("/pages", json={"page_id": "flow"}).status_code == 201
        assert api.post("/flow/plugin/web/open", json={"url": site.url + "/"}).status_code == 200
        lease = api.post("/flow/lease", json={"ttl": 300}).json()["lease"]
        first_browser = browser_pids(worker.store)

        # The call in hand runs under the lease on page flow; main is idle.
        call, out = in_thread(
            api.get, "/flow/plugin/testing/browser-wait", params={"ms": 60_000}, headers={"X-Lease": lease}
        )
        until_busy(api, "flow")
        kill_browser(worker.store)
        call.join(30)
        answer = out["answer"]
        assert answer.status_code == 502
        assert answer.json() == {"success": False, "error": BROWSER_STOPPED, "page_id": "flow"}

        seen = until_healthy(worker)
        assert seen and seen[0]["browser"] is False and seen[0]["browser_state"] == "relaunching"
        assert seen[0]["success"] is False and "relaunching" in seen[0]["error"]
        assert health(worker).json() == {
            "success": True, "page_id": None, "status": "ok", "browser": True, "browser_state": "up",
        }
        assert browser_pids(worker.store) and browser_pids(worker.store) != first_browser

        # The next call works, on the same profile: the cookie is still there.
        again = api.post("/main/plugin/web/evaluate", json={"expression": "6 * 7"})
        assert again.status_code == 200 and again.json()["value"] == 42
        assert cookie_value(api, site.url) == "kept"

        # The lease outlived the browser; the page says it was reopened and where it was.
        flow = page_state(api, "flow")
        assert flow["leased"] and 290 < flow["lease_expires_in"] <= 300  # restarted when the call ended
        assert flow["tab"] == "open" and flow["url"] == "about:blank"
        assert flow["reopened"]["cause"] == "browser_stopped"
        assert flow["reopened"]["lost_url"] == site.url + "/"
        assert api.post("/flow/plugin/web/evaluate", json={"expression": "1"}).status_code == 423
        under_lease = api.post("/flow/plugin/web/evaluate", json={"expression": "1"}, headers={"X-Lease": lease})
        assert under_lease.status_code == 200

        pages = {page["page_id"]: page for page in api.get("/pages").json()["pages"]}
        assert not any(page["busy"] or page["waiting"] or page["job_id"] for page in pages.values())
        assert metric(api, 'penelope_browser_relaunches_total{cause="browser_stopped"}') == 1
        assert metric(api, "penelope_browser_recovery_seconds_count") == 1
    assert "the browser stopped" in worker.log() and "browser up again" in worker.log()
    # The request log (and so the admin's page of it) has the relaunch, with its time to recover.
    rows = wait_until(lambda: browser_rows(worker.store), timeout=10, what="the relaunch in the request log")
    assert [(kind, route, status) for kind, route, status, _ in rows] == [("browser", "browser/relaunch/browser_stopped", None)]
    assert 0 < rows[0][3] < 30_000


def browser_rows(store: Path) -> list[tuple]:
    with sqlite3.connect(store / "penelope.db") as db:
        return db.execute(
            "select kind, route, status, duration_ms from activity_requestlogentry where kind = 'browser' order by id"
        ).fetchall()


def test_jobs_on_a_browser_that_is_killed_end_502_and_are_delivered_and_held_like_any_end(make_worker):
    worker = make_worker(FAST_RELAUNCH)
    with Receiver() as receiver, worker.client() as api:
        assert api.post("/pages", json={"page_id": "second"}).status_code == 201
        hooked = api.post(
            "/main/plugin/testing/browser-wait", json={"ms": 60_000},
            headers={"X-Callback-Url": receiver.url + "/200/killed"},
        )
        polled = api.post("/second/plugin/testing/sleep", json={"seconds": 600}, headers={"X-Result-Ttl": "600"})
        assert hooked.status_code == polled.status_code == 202
        until_busy(api, "main")
        until_busy(api, "second")
        kill_browser(worker.store)

        delivered = wait_until(lambda: receiver.received("/200/killed"), timeout=30, what="the webhook")
        body = json.loads(delivered[0].body)
        assert (body["state"], body["status"]) == ("done", 502)
        assert body["result"] == {"success": False, "error": BROWSER_STOPPED, "page_id": "main"}

        # The sleeping job meets no browser call, yet its tab went: it ends at once (the long-poll
        # would answer `running` after its 60 s otherwise), 502 too, not 200 ten minutes later.
        job_id = polled.json()["job_id"]
        ended = api.get(f"/jobs/{job_id}", params={"wait": 60}).json()
        assert (ended["state"], ended["status"]) == ("done", 502)
        assert ended["result"]["error"] == BROWSER_STOPPED
        assert api.get(f"/jobs/{job_id}").json()["status"] == 502  # held, and read again

        until_healthy(worker)
        assert api.get("/jobs", params={"state": "running"}).json()["jobs"] == []
        after = api.post("/second/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "60"})
        assert after.status_code == 202
        assert api.get(f"/jobs/{after.json()['job_id']}", params={"wait": 30}).json()["status"] == 200


def test_a_browser_killed_while_idle_comes_back_and_a_call_that_arrives_meanwhile_waits_for_it(make_worker, tmp_path):
    wrapper = ChromiumWrapper(tmp_path / "wrapper")
    worker = make_worker({**FAST_RELAUNCH, "PENELOPE_BROWSER": str(wrapper.path)})
    with worker.client() as api:
        assert api.post("/pages", json={"page_id": "second"}).status_code == 201
        wrapper.slow_launches(2)  # the relaunch takes two seconds more: calls arrive within them
        kill_browser(worker.store)
        wait_until(lambda: health(worker).status_code == 503, timeout=10, what="health to say the browser is down")

        # A plain call and a job start arrive during the relaunch: both wait for the browser, neither fails.
        call, out = in_thread(api.post, "/main/plugin/web/evaluate", json={"expression": "'waited'"})
        job = api.post("/second/plugin/web/evaluate", json={"expression": "'queued'"}, headers={"X-Result-Ttl": "60"})
        assert job.status_code == 202, job.text
        assert health(worker).json()["browser_state"] == "relaunching"
        call.join(60)
        assert out["answer"].status_code == 200 and out["answer"].json()["value"] == "waited"
        ended = api.get(f"/jobs/{job.json()['job_id']}", params={"wait": 30}).json()
        assert (ended["status"], ended["result"]["value"]) == (200, "queued")
        for page_id in ("main", "second"):
            assert page_state(api, page_id)["reopened"]["cause"] == "browser_stopped"


def test_a_page_whose_renderer_is_killed_answers_502_and_is_usable_at_the_next_call(make_worker, site):
    worker = make_worker(FAST_RELAUNCH)
    with worker.client() as api:
        assert api.post("/main/plugin/web/open", json={"url": site.url + "/"}).status_code == 200
        browser = browser_pids(worker.store)
        # An evaluation that waits in the page: the web family would answer a failed expression 400.
        call, out = in_thread(
            api.post, "/main/plugin/web/evaluate", json={"expression": "new Promise(r => setTimeout(() => r(1), 30000))"}
        )
        until_busy(api, "main")
        kill_renderers(worker.store)
        call.join(30)
        answer = out["answer"]
        assert answer.status_code == 502, answer.text
        assert answer.json()["error"] == "Page main's renderer crashed during the call; the page is reopened for the next call."

        crashed = page_state(api, "main")
        assert (crashed["tab"], crashed["url"], crashed["busy"]) == ("crashed", "", False)
        again = api.post("/main/plugin/web/open", json={"url": site.url + "/"})
        assert again.status_code == 200, again.text
        reopened = page_state(api, "main")
        assert reopened["tab"] == "open" and reopened["url"] == site.url + "/"
        assert reopened["reopened"]["cause"] == "page_crashed" and reopened["reopened"]["lost_url"] == site.url + "/"
        assert browser_pids(worker.store) == browser  # the browser itself never stopped
        assert health(worker).status_code == 200
        assert metric(api, "penelope_page_crashes_total") == 1
        assert metric(api, 'penelope_browser_relaunches_total{cause="browser_stopped"}') == 0
    rows = wait_until(lambda: browser_rows(worker.store), timeout=10, what="the crash in the request log")
    assert [(kind, route) for kind, route, _, _ in rows] == [("browser", "page/crashed")]


def test_a_browser_that_cannot_be_launched_again_makes_the_worker_exit_non_zero(make_worker, tmp_path):
    wrapper = ChromiumWrapper(tmp_path / "wrapper")
    worker = make_worker(
        {"PENELOPE_BROWSER": str(wrapper.path), "BROWSER_RELAUNCH_S": "0.1", "BROWSER_RELAUNCH_ATTEMPTS": "3"}
    )
    wrapper.break_launches()
    kill_browser(worker.store)
    assert worker.process.wait(60) == 1
    log = worker.log()
    assert log.count("browser launch attempt") == 2  # the third failure is the last
    assert "The browser could not be launched again: 3 launch attempt(s) failed" in log
    assert not browser_pids(worker.store)


def test_the_waker_starts_again_a_worker_whose_browser_could_not_be_relaunched(tmp_path):
    wrapper = ChromiumWrapper(tmp_path / "wrapper")
    env = {
        "PENELOPE_PLUGINS": "plugins.web,tests.support.testing_plugins", "WAKER_POLL_S": "0.2",
        "PENELOPE_BROWSER": str(wrapper.path), "BROWSER_RELAUNCH_S": "0.1", "BROWSER_RELAUNCH_ATTEMPTS": "2",
    }
    waker = WakerProcess(tmp_path / "waker", [{"name": "steady", "mode": "always"}], env=env)
    try:
        waker.start()
        first = waker.wait_for("steady", lambda b: b["state"] == "running", what="the always worker to start")
        wrapper.break_launches()
        kill_browser(waker.store("steady"))
        waker.wait_for("steady", lambda b: b["unexpected_exits"] == 1, what="the worker to exit")
        wrapper.break_launches(False)
        second = waker.wait_for("steady", lambda b: b["state"] == "running" and b["pid"] != first["pid"], timeout=60)
        assert second["last_exit"]["returncode"] == 1 and second["last_exit"]["expected"] is False
        with waker.through("steady") as via:
            assert via.post("/main/plugin/web/evaluate", json={"expression": "1 + 1"}).json()["value"] == 2
    finally:
        left = waker.stop()
    assert left == []


def test_a_recycle_after_calls_waits_for_the_job_in_hand_and_reopens_every_page(make_worker):
    worker = make_worker({**FAST_RELAUNCH, "BROWSER_RECYCLE_AFTER_CALLS": "3"})
    with worker.client() as api:
        assert api.post("/pages", json={"page_id": "side"}).status_code == 201
        first = browser_pids(worker.store)
        job = api.post("/side/plugin/testing/sleep", json={"seconds": 60}, headers={"X-Result-Ttl": "60"}).json()
        until_busy(api, "side")
        for n in range(3):
            assert api.post("/main/plugin/web/evaluate", json={"expression": str(n)}).status_code == 200
        # Three calls ended, but a job runs: nothing is recycled under it.
        assert health(worker).status_code == 200 and browser_pids(worker.store) == first
        assert api.post(f"/jobs/{job['job_id']}/cancel").status_code == 200
        wait_until(lambda: metric(api, 'penelope_browser_relaunches_total{cause="calls"}') == 1, timeout=30,
                   what="the recycle")
        until_healthy(worker)
        assert browser_pids(worker.store) != first
        for page_id in ("main", "side"):
            state = page_state(api, page_id)
            assert state["tab"] == "open" and state["reopened"]["cause"] == "calls"
        assert api.post("/side/plugin/web/evaluate", json={"expression": "'fresh'"}).json()["value"] == "fresh"


def test_a_browser_past_its_memory_bound_is_recycled_when_idle(make_worker):
    # Any browser is past one megabyte: it is recycled at the first check while nothing runs.
    worker = make_worker({**FAST_RELAUNCH, "BROWSER_MAX_MB": "1", "BROWSER_CHECK_S": "0.2"})
    with worker.client() as api:
        first = browser_pids(worker.store)
        wait_until(lambda: metric(api, 'penelope_browser_relaunches_total{cause="memory"}') >= 1, timeout=30,
                   what="a recycle for memory")
        wait_until(lambda: browser_pids(worker.store) not in ([], first), timeout=30, what="a new browser")
        assert "passed BROWSER_MAX_MB" in worker.log()


def test_health_and_activity_say_relaunching_while_launches_fail_and_up_once_one_works(make_worker, tmp_path: Path):
    wrapper = ChromiumWrapper(tmp_path / "wrapper")
    worker = make_worker({"PENELOPE_BROWSER": str(wrapper.path), "BROWSER_RELAUNCH_S": "2", "BROWSER_RELAUNCH_ATTEMPTS": "5"})
    with worker.client() as api:
        assert api.get("/activity").json()["browser_state"] == "up"
        wrapper.break_launches()
        kill_browser(worker.store)
        wait_until(lambda: "browser launch attempt 1 of 5 failed" in worker.log(), timeout=30, what="a failed attempt")
        answer = health(worker)
        assert answer.status_code == 503 and answer.json()["browser_state"] == "relaunching"
        assert api.get("/activity").json()["browser_state"] == "relaunching"
        wrapper.break_launches(False)
        until_healthy(worker)
        assert api.get("/activity").json()["browser_state"] == "up"


def test_two_rounds_of_the_browser_soak_account_for_every_call_and_job(tmp_path):
    report = browser_soak.run(2, seed=20261204, directory=tmp_path)
    assert report.problems == []
    assert report.rounds == 2 and report.jobs == 2 * len(browser_soak.JOB_PAGES) and report.calls == 12
    assert len(report.recovery_s["browser"]) == len(report.recovery_s["renderer"]) == 1
    assert set(report.answers) <= {200, 502}
