"""Job control beyond the guide, against a real worker, a real browser and a
real webhook receiver: cancel, progress, long-poll, the job list and
idempotent starts."""

from __future__ import annotations

import json
import sqlite3
import threading

import httpx
import pytest

from activity.models import RequestLogEntry
from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from jobs.models import Job
from tests.conftest import worker_env
from tests.support.worker_store import WorkerStore
from tests.test_jobs import job_ids

ENV = {
    "WEBHOOK_ATTEMPTS_S": "0,0.5",
    "WEBHOOK_TIMEOUT_S": "0.5",
    "SWEEP_S": "0.2",
    "CANCEL_GRACE_S": "0.5",
    "MAX_WAITERS": "3",
    "MAX_PAGES": "4",
    "DB_BUSY_TIMEOUT_S": "5",
    "REQUEST_LOG_FLUSH_S": "0.1",
}
CANCELLED_RESULT = {"success": False, "error": "job cancelled by a client", "page_id": "main"}


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**ENV)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def worker_db(worker, django_db_blocker) -> WorkerStore:
    return WorkerStore(worker.store, django_db_blocker)


def start(api, action, params=None, *, page="main", ttl=60, callback=None, headers=None) -> httpx.Response:
    job_headers = dict(headers or {})
    job_headers.update({"X-Callback-Url": callback} if callback else {"X-Result-Ttl": str(ttl)})
    return api.post(f"/{page}/plugin/{action}", json=params or {}, headers=job_headers)


def started(api, action, params=None, **kwargs) -> str:
    response = start(api, action, params, **kwargs)
    assert response.status_code == 202, response.text
    return response.json()["job_id"]


def page_state(api, page="main") -> dict:
    return api.get(f"/{page}").json()


def running_on_page(api, job_id: str, page="main") -> None:
    wait_until(lambda: page_state(api, page)["job_id"] == job_id, what=f"job {job_id} on page {page}")


def ended(api, job_id: str) -> dict:
    return wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}").json()) and body.get("state") not in (None, "running") and body,
        what=f"job {job_id} to end",
    )


# --- cancel -------------------------------------------------------------------------------


def test_cancel_stops_a_plugin_waiting_in_the_browser(api, worker_db):
    job_id = started(api, "testing/browser-wait", {"ms": 60_000})
    running_on_page(api, job_id)
    response = api.post(f"/jobs/{job_id}/cancel")
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["job_id"] == job_id and job["state"] == "cancelled" and job["status"] == 499
    assert job["result"] == CANCELLED_RESULT
    assert job["finished_at"] is not None and 0 < job["expires_in"] <= 60
    # The answer came once the plugin had stopped: the page is free already.
    state = page_state(api)
    assert not state["busy"] and state["job_id"] is None
    polled = api.get(f"/jobs/{job_id}").json()
    assert polled == job | {"expires_in": polled["expires_in"]}
    # Stored so, not only answered from the worker's memory:
    assert worker_db.list(Job.objects.filter(id=job_id).values_list("state", "status")) == [("cancelled", 499)]
    end_rows = RequestLogEntry.objects.filter(job_id=job_id, status__isnull=False).values_list("status", flat=True)
    wait_until(lambda: worker_db.list(end_rows), what="the job's end row in the request log")
    assert worker_db.list(end_rows) == [499]
    assert api.post("/main/plugin/web/state").status_code == 200  # the page works on


def test_cancel_under_a_lease_keeps_the_lease_and_restarts_its_ttl(api):
    lease = api.post("/main/lease", json={"ttl": 30}).json()["lease"]
    try:
        job_id = started(api, "testing/browser-wait", {"ms": 60_000}, headers={"X-Lease": lease})
        running_on_page(api, job_id)
        assert api.post(f"/jobs/{job_id}/cancel").json()["state"] == "cancelled"
        state = page_state(api)
        assert state["leased"] and not state["busy"]
        assert 29 < state["lease_expires_in"] <= 30
        assert api.post("/main/plugin/web/state", headers={"X-Lease": lease}).status_code == 200
    finally:
        api.request("DELETE", "/main/lease", headers={"X-Lease": lease})


def test_a_plugin_that_will_not_stop_loses_its_tab_and_the_page_goes_on(api):
    job_id = started(api, "testing/stubborn")
    running_on_page(api, job_id)
    job = api.post(f"/jobs/{job_id}/cancel").json()
    assert job["state"] == "cancelled" and job["result"] == CANCELLED_RESULT
    state = page_state(api)
    assert not state["busy"] and state["url"] == "about:blank"  # a new tab, under the same name
    assert api.post("/main/plugin/web/state").json()["success"] is True


def test_a_cancelled_webhook_job_is_delivered_like_any_ended_job(api, receiver):
    job_id = started(api, "testing/browser-wait", {"ms": 60_000}, callback=receiver.url + "/200/cancelled")
    running_on_page(api, job_id)
    assert api.post(f"/jobs/{job_id}/cancel").json()["state"] == "cancelled"
    hit = wait_until(lambda: receiver.received("/200/cancelled"), what="the cancelled job's webhook")[0]
    body = json.loads(hit.body)
    assert body["job_id"] == job_id and body["state"] == "cancelled" and body["status"] == 499
    assert body["result"] == CANCELLED_RESULT


def test_an_ended_job_answers_409_naming_its_state_and_an_unknown_one_404(api):
    job_id = started(api, "web/state")
    assert ended(api, job_id)["state"] == "done"
    refused = api.post(f"/jobs/{job_id}/cancel")
    assert refused.status_code == 409
    assert refused.json() == {"success": False, "error": f"Job {job_id} has already ended: its state is done.", "page_id": "main"}
    assert api.get(f"/jobs/{job_id}").json()["state"] == "done"
    for unknown in ("0123456789abcdef", "nope", "0123456789ABCDEF"):
        missing = api.post(f"/jobs/{unknown}/cancel")
        assert missing.status_code == 404 and missing.json()["success"] is False
    assert api.get("/jobs/0123456789abcdef/cancel").status_code == 405


@pytest.mark.parametrize("seconds", [0, 0.001, 0.003, 0.006, 0.01, 0.02, 0.04])
def test_cancel_racing_the_plugins_own_end_has_exactly_one_outcome(api, seconds):
    # Cancelled right after its 202: short runs end around the moment the cancel arrives.
    job_id = started(api, "testing/sleep", {"seconds": seconds, "tag": "own"})
    response = api.post(f"/jobs/{job_id}/cancel")
    job = ended(api, job_id)
    if response.status_code == 200:
        assert response.json()["state"] == "cancelled"
        assert job["state"] == "cancelled" and job["result"] == CANCELLED_RESULT
    else:
        assert response.status_code == 409, response.text
        assert response.json()["error"] == f"Job {job_id} has already ended: its state is done."
        assert job["state"] == "done" and job["result"]["tag"] == "own"


def test_200_cancels_racing_the_plugins_end_each_have_one_outcome_and_no_result_is_dropped(api):
    outcomes = {"cancelled": 0, "done": 0}
    for number in range(200):
        job_id = started(api, "testing/sleep", {"seconds": (number % 10) / 1000, "tag": f"own-{number}"})
        response = api.post(f"/jobs/{job_id}/cancel")
        job = ended(api, job_id)
        if response.status_code == 200:
            assert job["state"] == "cancelled" and job["result"] == CANCELLED_RESULT
        else:
            assert response.status_code == 409, response.text
            assert job["state"] == "done" and job["result"]["tag"] == f"own-{number}"
        outcomes[job["state"]] += 1
    assert sum(outcomes.values()) == 200


def test_a_cancelled_job_stays_cancelled_across_a_restart(make_worker):
    worker = make_worker(ENV)
    with worker.client() as api:
        job_id = started(api, "testing/browser-wait", {"ms": 60_000}, ttl=600)
        running_on_page(api, job_id)
        assert api.post(f"/jobs/{job_id}/cancel").status_code == 200
    worker.stop()
    worker.start()
    with worker.client() as api:
        job = api.get(f"/jobs/{job_id}").json()
    assert job["state"] == "cancelled" and job["status"] == 499 and job["result"] == CANCELLED_RESULT


# --- progress -----------------------------------------------------------------------------


def test_progress_shows_in_polls_and_the_last_report_stays_with_the_end(api):
    job_id = started(api, "testing/count", {"to": 3, "pause_s": 0.4})
    first = wait_until(lambda: api.get(f"/jobs/{job_id}").json()["progress"], what="a first progress report")
    assert set(first) == {"done", "total", "message", "at"}
    assert first["total"] == 3 and first["done"] in (1, 2, 3) and first["message"] == f"counted {first['done']}"
    job = ended(api, job_id)
    assert job["progress"]["done"] == 3 and job["progress"]["message"] == "counted 3"
    assert job["progress"]["at"] >= first["at"]
    plain = api.post("/main/plugin/web/state")
    assert "progress" not in plain.json()  # a plain call's answer is unchanged


def test_a_job_without_reports_shows_null_progress(api):
    job_id = started(api, "web/state")
    assert ended(api, job_id)["progress"] is None


def test_progress_reaches_the_webhook_body(api, receiver):
    started(api, "testing/count", {"to": 5}, callback=receiver.url + "/200/progress")
    hit = wait_until(lambda: receiver.received("/200/progress"), what="the webhook")[0]
    progress = json.loads(hit.body)["progress"]
    assert progress["done"] == 5 and progress["total"] == 5 and progress["message"] == "counted 5"


def test_the_demo_scroll_reports_as_it_goes(api):
    job_id = started(api, "demo/get-following", {"handle": "alice", "limit": 30, "pause_ms": 150})
    seen = set()

    def progressed_twice():
        progress = api.get(f"/jobs/{job_id}").json()["progress"]
        if progress:
            seen.add(progress["done"])
        return len(seen) >= 2

    wait_until(progressed_twice, what="two different progress reports")
    job = ended(api, job_id)
    assert job["state"] == "done" and job["progress"]["done"] == job["result"]["count"] == 30
    assert job["progress"]["total"] == 30


# --- long-poll ----------------------------------------------------------------------------


def test_a_long_poll_answers_when_the_job_ends(worker, api):
    job_id = started(api, "testing/sleep", {"seconds": 0.3, "tag": "waited"})
    # Without the wake-up the answer would take the whole 60 s, past this client's 10 s.
    with worker.client(timeout=10) as client:
        job = client.get(f"/jobs/{job_id}", params={"wait": "60"}).json()
    assert job["state"] == "done" and job["result"]["tag"] == "waited"


def test_a_long_poll_answers_the_running_job_when_its_wait_is_over(api):
    job_id = started(api, "testing/browser-wait", {"ms": 60_000})
    try:
        job = api.get(f"/jobs/{job_id}", params={"wait": "0.3"}).json()
        assert job["state"] == "running" and job["result"] is None and job["job_id"] == job_id
    finally:
        api.post(f"/jobs/{job_id}/cancel")


def test_a_long_poll_of_an_ended_or_unknown_job_answers_at_once(api):
    job_id = started(api, "web/state")
    done = ended(api, job_id)
    assert api.get(f"/jobs/{job_id}", params={"wait": "60"}).json()["result"] == done["result"]
    assert api.get("/jobs/0123456789abcdef", params={"wait": "60"}).status_code == 404


@pytest.mark.parametrize("wait", ["0", "-1", "60.5", "61", "abc", "1e1", "", "nan", "inf", "0x10"])
def test_a_bad_wait_answers_400(api, wait):
    response = api.get("/jobs/0123456789abcdef", params={"wait": wait})
    assert response.status_code == 400
    assert response.json()["error"] == "wait must be a number of seconds, more than 0 and at most 60."


def test_waiters_past_max_waiters_answer_503_and_clients_that_leave_free_their_place(worker, api):
    job_id = started(api, "testing/browser-wait", {"ms": 60_000})
    try:
        # MAX_WAITERS is 3 here: three clients that give up after 0.3 s of a 60 s wait.
        for _ in range(3):
            with worker.client(timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
                client.get(f"/jobs/{job_id}", params={"wait": "60"})
        # Their places are free again: three more wait at once, and a fourth is refused.
        with worker.client(timeout=30) as client:
            results: list[int] = []
            waiting = [
                threading.Thread(target=lambda: results.append(client.get(f"/jobs/{job_id}", params={"wait": "5"}).status_code))
                for _ in range(3)
            ]
            for thread in waiting:
                thread.start()
            # A waiter registers on the same turn of the worker's loop that counts its request in flight.
            wait_until(lambda: api.get("/activity").json()["requests_in_flight"] >= 3, what="the three waiters")
            refused = api.get(f"/jobs/{job_id}", params={"wait": "1"})
            assert refused.status_code == 503 and "MAX_WAITERS" in refused.json()["error"]
            assert api.post(f"/jobs/{job_id}/cancel").status_code == 200  # ends the job: all three answer now
            for thread in waiting:
                thread.join(10)
            assert results == [200, 200, 200]
    finally:
        api.post(f"/jobs/{job_id}/cancel")


# --- the job list -------------------------------------------------------------------------


def list_jobs(api, **params) -> dict:
    response = api.get("/jobs", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_list_pages_newest_first_and_filters(make_worker):
    worker = make_worker(ENV)
    with worker.client() as api:
        ids = []
        for n in range(5):
            ids.append(started(api, "testing/sleep", {"seconds": 0, "tag": str(n)}))
            ended(api, ids[-1])
        other = started(api, "web/state", page="main")
        ended(api, other)
        api.post("/pages", json={"page_id": "side"})
        side = started(api, "testing/browser-wait", {"ms": 60_000}, page="side")
        running_on_page(api, side, "side")
        try:
            everything = list_jobs(api)
            assert set(everything) == {"success", "page_id", "jobs", "next"}
            assert everything["success"] is True and everything["page_id"] is None and everything["next"] is None
            assert [job["job_id"] for job in everything["jobs"]] == [side, other, *reversed(ids)]
            entry = everything["jobs"][1]
            assert "result" not in entry and entry["state"] == "done" and entry["plugin"] == "web/state"
            polled = api.get(f"/jobs/{other}").json()
            assert entry == {key: value for key, value in polled.items() if key not in ("result", "expires_in")} | {
                "expires_in": entry["expires_in"]
            }

            pages, cursor = [], None
            while True:
                answer = list_jobs(api, limit=2, **({"cursor": cursor} if cursor else {}))
                pages.append([job["job_id"] for job in answer["jobs"]])
                cursor = answer["next"]
                if cursor is None:
                    break
            assert pages == [[side, other], [ids[4], ids[3]], [ids[2], ids[1]], [ids[0]]]

            assert [j["job_id"] for j in list_jobs(api, state="running")["jobs"]] == [side]
            assert [j["job_id"] for j in list_jobs(api, page_id="side")["jobs"]] == [side]
            assert [j["job_id"] for j in list_jobs(api, plugin="web/state")["jobs"]] == [other]
            assert list_jobs(api, plugin="testing/sleep", state="done", limit=1)["jobs"][0]["job_id"] == ids[4]
            assert list_jobs(api, state="cancelled")["jobs"] == []
        finally:
            api.post(f"/jobs/{side}/cancel")


@pytest.mark.parametrize(
    "params, field",
    [
        ({"state": "sleeping"}, "state"),
        ({"state": ""}, "state"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"page_id": "Not A Page"}, "page_id"),
        ({"plugin": "no-slash"}, "plugin"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "WzEsMl0"}, "cursor"),  # [1,2]: decodes, but is not a cursor this worker gave
    ],
)
def test_bad_list_filters_answer_400_naming_them(api, params, field):
    response = api.get("/jobs", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False and field in response.json()["error"]


# --- idempotent starts ---------------------------------------------------------------------


def test_a_repeated_start_answers_the_same_202_and_starts_nothing(api, worker_db):
    key = {"Idempotency-Key": "order 66 / try 1"}
    first = start(api, "testing/sleep", {"seconds": 0.2, "tag": "once"}, headers=key)
    assert first.status_code == 202
    again = start(api, "testing/sleep", {"seconds": 0.2, "tag": "once"}, headers=key)
    assert again.status_code == 202 and again.json() == first.json()
    job_id = first.json()["job_id"]
    ended(api, job_id)
    after_end = start(api, "testing/sleep", {"seconds": 0.2, "tag": "once"}, headers=key)
    assert after_end.status_code == 202 and after_end.json() == first.json()  # held: still the same job
    assert worker_db.count(Job.objects.filter(idempotency_key=key["Idempotency-Key"])) == 1
    # The key is forgotten with its job: the same start is a new job.
    assert api.delete(f"/jobs/{job_id}").status_code == 204
    new = start(api, "testing/sleep", {"seconds": 0, "tag": "once"}, headers=key)
    assert new.status_code == 202 and new.json()["job_id"] != job_id
    ended(api, new.json()["job_id"])


@pytest.mark.parametrize(
    "change",
    [
        {"params": {"seconds": 0, "tag": "other"}},
        {"action": "web/state", "params": {}},
        {"ttl": 30},
        {"page": "second"},
    ],
)
def test_the_same_key_with_a_different_request_answers_422(api, change):
    api.post("/pages", json={"page_id": "second"})
    key = {"Idempotency-Key": f"mismatch {sorted(change)}"}
    first = start(api, "testing/sleep", {"seconds": 0, "tag": "one"}, headers=key)
    assert first.status_code == 202
    ended(api, first.json()["job_id"])
    before = job_ids(api)
    response = start(
        api, change.get("action", "testing/sleep"), change.get("params", {"seconds": 0, "tag": "one"}),
        page=change.get("page", "main"), ttl=change.get("ttl", 60), headers=key,
    )
    assert response.status_code == 422, response.text
    assert "Idempotency-Key" in response.json()["error"]
    assert not job_ids(api) - before  # no job was started
    assert not page_state(api, change.get("page", "main"))["busy"]


def test_a_repeat_while_the_first_start_is_being_stored_answers_409(worker, api):
    key = {"Idempotency-Key": "slow store"}
    lock = sqlite3.connect(worker.store / "penelope.db", isolation_level=None)
    lock.execute("begin immediate")  # the store is locked: the first start waits to be stored
    results: dict[str, httpx.Response] = {}
    first = threading.Thread(target=lambda: results.setdefault("first", start(api, "web/state", headers=key)))
    try:
        first.start()
        # The first start has claimed the page (so it holds its key) and waits for the store.
        wait_until(lambda: page_state(api)["job_id"] is not None, what="the first start to claim the page")
        with worker.client() as other:
            repeat = start(other, "web/state", headers=key)
        assert repeat.status_code == 409, repeat.text
    finally:
        lock.execute("rollback")
        lock.close()
        first.join(20)
    assert "still being stored" in repeat.json()["error"]
    assert results["first"].status_code == 202
    assert start(api, "web/state", headers=key).json() == results["first"].json()


@pytest.mark.parametrize("bad", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_bad_idempotency_key_answers_400_and_starts_nothing(api, bad):
    before = job_ids(api)
    response = start(api, "web/state", headers={"Idempotency-Key": bad.encode("latin-1")})
    assert response.status_code == 400
    assert response.json()["error"] == "Idempotency-Key must be 1 to 255 printable ASCII characters."
    assert not job_ids(api) - before  # no job was started


def test_a_plain_call_ignores_the_idempotency_key(api):
    for _ in range(2):
        assert api.post("/main/plugin/web/state", headers={"Idempotency-Key": ""}).status_code == 200
