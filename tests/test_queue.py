"""Jobs that wait for a busy page (X-Queue-Timeout), against a real worker,
a real browser and a real webhook receiver."""

from __future__ import annotations

import json
import threading
import time

import pytest

from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.support.raw_socket import http_head
from tests.test_jobs import job_ids

ENV = {"QUEUE_MAX": "3", "POOL_PAGE_IDLE_S": "1", "WEBHOOK_ATTEMPTS_S": "0", "WEBHOOK_TIMEOUT_S": "2", "CANCEL_GRACE_S": "0.5"}


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**ENV)).start()
    yield running
    running.stop()


def start(api, seconds: float, *, tag: str = "q", page: str = "main", ttl: float = 60, **headers: str):
    sent = {"X-Result-Ttl": str(ttl), **{name.replace("_", "-"): value for name, value in headers.items()}}
    return api.post(f"/{page}/plugin/testing/sleep", json={"seconds": seconds, "tag": tag}, headers=sent)


def accepted(response) -> dict:
    assert response.status_code == 202, response.text
    return response.json()


def poll(api, job_id: str) -> dict:
    return api.get(f"/jobs/{job_id}").json()


def ended(api, job_id: str) -> dict:
    return wait_until(
        lambda: (body := poll(api, job_id)) and body["state"] not in ("queued", "running") and body,
        what=f"job {job_id} to end",
    )


def holding(api, seconds: float = 30) -> str:
    """A job that holds page main until it is cancelled."""
    job = accepted(start(api, seconds, tag="holder", X_Queue_Timeout="5"))
    assert job["state"] == "running" and job["queue"] is None  # the page was free: it runs at once
    return job["job_id"]


def release(api, job_id: str) -> None:
    assert api.post(f"/jobs/{job_id}/cancel").status_code == 200


def test_a_busy_page_queues_a_job_that_asks_and_runs_it_when_the_page_frees(api):
    holder = holding(api)
    assert start(api, 0).status_code == 409  # without the header: as the guide says
    first = accepted(start(api, 0, tag="first", X_Queue_Timeout="30"))
    second = accepted(start(api, 0, tag="second", X_Queue_Timeout="30"))
    assert first["state"] == second["state"] == "queued"
    assert (first["queue"]["position"], second["queue"]["position"]) == (1, 2)
    assert first["queue"]["timeout_at"] == pytest.approx(first["queue"]["enqueued_at"] + 30, abs=0.01)
    polled = poll(api, second["job_id"])
    assert polled["state"] == "queued" and polled["queue"]["position"] == 2 and polled["result"] is None
    listed = api.get("/jobs", params={"state": "queued"}).json()["jobs"]
    assert {job["job_id"] for job in listed} == {first["job_id"], second["job_id"]}
    release(api, holder)
    done = [ended(api, job["job_id"]) for job in (first, second)]
    assert [job["result"]["tag"] for job in done] == ["first", "second"]
    assert done[0]["result"]["ended"] <= done[1]["result"]["started"]  # one after the other, in order
    assert all(job["queue"] is None and job["status"] == 200 for job in done)
    # A start without the header answers, and polls, exactly as the guide shows.
    plain = accepted(start(api, 0))
    assert "state" not in plain and "queue" not in plain
    assert "queue" not in ended(api, plain["job_id"])


def test_a_higher_priority_goes_first_and_equal_ones_keep_their_order(api):
    holder = holding(api)
    low = accepted(start(api, 0, tag="low", X_Queue_Timeout="30"))
    high = accepted(start(api, 0, tag="high", X_Queue_Timeout="30", X_Priority="5"))
    also_high = accepted(start(api, 0, tag="also-high", X_Queue_Timeout="30", X_Priority="5"))
    assert [poll(api, job["job_id"])["queue"]["position"] for job in (high, also_high, low)] == [1, 2, 3]
    release(api, holder)
    order = sorted((ended(api, job["job_id"])["result"] for job in (low, high, also_high)), key=lambda r: r["started"])
    assert [result["tag"] for result in order] == ["high", "also-high", "low"]


def plain_call_in_line(worker, tag: str) -> tuple[threading.Thread, list]:
    """A plain call sent from a thread of its own; it waits in the page's line."""
    answers: list = []

    def call() -> None:
        with worker.client() as client:
            answers.append(client.post("/main/plugin/testing/sleep", json={"seconds": 0.2, "tag": tag}).json())

    thread = threading.Thread(target=call)
    thread.start()
    return thread, answers


def test_plain_calls_and_queued_jobs_share_one_arrival_order(api, worker):
    holder = holding(api)
    first_job = accepted(start(api, 0.2, tag="job-first", X_Queue_Timeout="30"))
    thread, answers = plain_call_in_line(worker, "plain-second")
    wait_until(lambda: api.get("/main").json()["waiting"] == 1, what="the plain call to wait in line")
    release(api, holder)
    thread.join(30)
    job = ended(api, first_job["job_id"])["result"]
    assert answers[0]["tag"] == "plain-second" and job["ended"] <= answers[0]["started"]

    holder = holding(api)
    thread, answers = plain_call_in_line(worker, "plain-first")
    wait_until(lambda: api.get("/main").json()["waiting"] == 1, what="the plain call to wait in line")
    second_job = accepted(start(api, 0.2, tag="job-second", X_Queue_Timeout="30"))
    assert second_job["queue"]["position"] == 2  # behind the plain call
    release(api, holder)
    thread.join(30)
    job = ended(api, second_job["job_id"])["result"]
    assert answers[0]["tag"] == "plain-first" and answers[0]["ended"] <= job["started"]


def test_a_queued_job_is_accepted_when_it_queues_and_starts_when_it_takes_its_page(api):
    holder = holding(api)
    job = accepted(start(api, 0, tag="waits", X_Queue_Timeout="30"))
    waiting = poll(api, job["job_id"])
    assert waiting["state"] == "queued" and waiting["started_at"] is None
    assert waiting["accepted_at"] == job["queue"]["enqueued_at"]
    listed = [entry for entry in api.get("/jobs", params={"state": "queued"}).json()["jobs"] if entry["job_id"] == job["job_id"]]
    assert (listed[0]["accepted_at"], listed[0]["started_at"]) == (waiting["accepted_at"], None)
    release(api, holder)
    done = ended(api, job["job_id"])
    assert done["accepted_at"] == waiting["accepted_at"] and done["started_at"] >= done["accepted_at"]
    assert done["started_at"] <= done["result"]["started"]  # it took its page, then its plugin ran
    assert "accepted_at" not in poll(api, holder)  # a job that ran at once answers as the guide shows


def test_a_queued_job_that_waits_too_long_ends_timed_out(api):
    holder = holding(api)
    job = accepted(start(api, 0, X_Queue_Timeout="0.5"))
    body = ended(api, job["job_id"])
    assert (body["state"], body["status"]) == ("timed_out", 409)
    assert body["result"] == {
        "success": False, "error": "Page main stayed busy: the job waited 0.5 s in its queue.", "page_id": "main",
    }
    assert body["expires_in"] > 50  # held its ttl from its end, like any ended job
    release(api, holder)


def test_a_timed_out_job_is_delivered_by_webhook(api):
    holder = holding(api)
    with Receiver() as receiver:
        response = api.post(
            "/main/plugin/testing/sleep", json={"seconds": 0, "tag": "hook"},
            headers={"X-Callback-Url": receiver.url + "/200/queued", "X-Queue-Timeout": "0.3"},
        )
        assert accepted(response)["state"] == "queued"
        hit = wait_until(lambda: receiver.received("/200/queued"), what="the timed-out job's webhook")[0]
    body = json.loads(hit.body)
    assert body["state"] == "timed_out" and body["status"] == 409
    assert body["started_at"] is None and body["accepted_at"] > 0  # it never took its page
    release(api, holder)


def test_cancel_of_a_queued_job_ends_it_without_running(api):
    holder = holding(api)
    job = accepted(start(api, 0, tag="never", X_Queue_Timeout="30"))
    assert api.delete(f"/jobs/{job['job_id']}").status_code == 409  # forget: not while queued
    cancelled = api.post(f"/jobs/{job['job_id']}/cancel")
    assert cancelled.status_code == 200
    body = cancelled.json()
    assert (body["state"], body["status"], body["result"]["error"]) == ("cancelled", 499, "job cancelled by a client")
    assert poll(api, holder)["state"] == "running"  # the page was never the queued job's
    release(api, holder)


def scraped(api, name: str) -> float:
    """One unlabelled series of the worker's metrics."""
    line = next(line for line in api.get("/metrics").text.splitlines() if line.startswith(name + " "))
    return float(line.split()[1])


def test_a_full_queue_answers_429_with_retry_after_and_stores_nothing(api):
    refused_before, waited_before = scraped(api, "penelope_queue_refused_total"), scraped(api, "penelope_queue_wait_seconds_count")
    holder = holding(api)
    queued = [accepted(start(api, 0, X_Queue_Timeout="30")) for _ in range(3)]
    before = job_ids(api)
    refused = start(api, 0, X_Queue_Timeout="30")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert 'penelope_page_queue_depth{page_id="main"} 3.0' in api.get("/metrics").text
    assert scraped(api, "penelope_queue_refused_total") == refused_before + 1
    assert refused.json()["success"] is False and "QUEUE_MAX" in refused.json()["error"]
    assert job_ids(api) == before
    release(api, holder)
    for job in queued:
        assert ended(api, job["job_id"])["state"] == "done"
    assert scraped(api, "penelope_queue_wait_seconds_count") == waited_before + 3


def raw_start(worker, page: str) -> tuple[str, dict[str, str]]:
    """A queued start on a bare socket: its answer's status line as sent, and its headers."""
    body = b'{"seconds": 0, "tag": "raw"}'
    request = (
        f"POST /api/v1/{page}/plugin/testing/sleep HTTP/1.1\r\nHost: 127.0.0.1:{worker.port}\r\n"
        f"Authorization: Bearer {worker.key}\r\nContent-Type: application/json\r\nX-Result-Ttl: 60\r\n"
        f"X-Queue-Timeout: 60\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    return http_head("127.0.0.1", worker.port, request)


def test_a_full_queue_s_retry_after_counts_down_the_running_job_under_the_standard_status_line(api, worker):
    """Retry-After is what the job running on the page has left of the
    page's recent run time (here, one job of 5 s), and the 429 goes out as
    `429 Too Many Requests` (daphne wrote `Unknown Status`)."""
    assert api.post("/pages", json={"page_id": "timed"}).status_code == 201
    try:
        ended(api, accepted(start(api, 5, page="timed", tag="measure"))["job_id"])
        holder = accepted(start(api, 30, page="timed", tag="holder"))["job_id"]
        queued = [accepted(start(api, 0, page="timed", X_Queue_Timeout="60")) for _ in range(3)]
        status_line, first = raw_start(worker, "timed")
        assert status_line == "HTTP/1.1 429 Too Many Requests"
        assert first["content-type"] == "application/json"
        time.sleep(2)
        _, later = raw_start(worker, "timed")
        # Before: the page's run time whatever had run of it (6, both times).
        assert 1 <= int(later["retry-after"]) < int(first["retry-after"]) <= 6
        release(api, holder)
        assert all(ended(api, job["job_id"])["state"] == "done" for job in queued)
    finally:
        api.delete("/timed")


def test_pressure_says_what_is_running_waiting_and_refused(api):
    holder = holding(api)
    queued = [accepted(start(api, 0, X_Queue_Timeout="30")) for _ in range(2)]
    before = api.get("/pressure").json()["rejected_last_minute"]
    assert start(api, 0).status_code == 409
    body = api.get("/pressure").json()
    assert body["success"] is True and body["page_id"] is None
    assert body["pages"]["busy"] == 1 and body["pages"]["max"] == 3 and body["pages"]["open"] >= 1
    assert (body["running"], body["queued"]) == (1, 2)
    assert body["oldest_queued_s"] > 0
    assert body["jobs_held"] >= 3 and body["max_jobs"] == 1000 and body["accepting"] is True
    assert body["rejected_last_minute"] == before + 1
    # Queued jobs are work in flight: a sleepy worker stays awake for them.
    activity = api.get("/activity").json()
    assert activity["jobs_in_flight"] == 3 and activity["stay_awake"] == 1
    release(api, holder)
    for job in queued:
        ended(api, job["job_id"])
    after = api.get("/pressure").json()
    assert (after["running"], after["queued"], after["oldest_queued_s"]) == (0, 0, None)


def open_pages(api) -> set[str]:
    return {page["page_id"] for page in api.get("/pages").json()["pages"]}


def test_any_fills_the_pages_then_queues_for_the_first_that_frees(api):
    holder = holding(api)  # main is busy
    runs = [accepted(api.post("/any/plugin/testing/sleep", json={"seconds": 30}, headers={"X-Result-Ttl": "60"}))
            for _ in range(2)]
    assert {job["page_id"] for job in runs} == {"pool-1", "pool-2"}  # opened for them, up to MAX_PAGES (3)
    refused = api.post("/any/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "60"})
    assert refused.status_code == 409 and refused.json()["page_id"] == "any"
    waiting = accepted(api.post(
        "/any/plugin/testing/sleep", json={"seconds": 0, "tag": "anywhere"},
        headers={"X-Result-Ttl": "60", "X-Queue-Timeout": "30"},
    ))
    assert (waiting["state"], waiting["page_id"], waiting["queue"]["position"]) == ("queued", "any", 1)
    release(api, runs[1]["job_id"])  # pool-2 frees first: the queued job takes it
    done = ended(api, waiting["job_id"])
    assert (done["state"], done["page_id"], done["result"]["tag"]) == ("done", runs[1]["page_id"], "anywhere")
    for job in (holder, runs[0]["job_id"]):
        release(api, job)
    # A plain call on `any` runs on a free page and says which.
    plain = api.post("/any/plugin/testing/sleep", json={"seconds": 0, "tag": "plain"})
    assert plain.status_code == 200 and plain.json()["page_id"] in {"main", "pool-1", "pool-2"}
    # Pool pages left idle for POOL_PAGE_IDLE_S (1 s here) are closed; main stays.
    wait_until(lambda: open_pages(api) == {"main"}, what="the idle pool pages to close")


def test_any_never_takes_a_leased_page_and_refuses_a_lease(api):
    lease = api.post("/main/lease", json={"ttl": 30}).json()["lease"]
    try:
        answer = api.post("/any/plugin/testing/sleep", json={"seconds": 0, "tag": "not-main"})
        assert answer.status_code == 200 and answer.json()["page_id"].startswith("pool-")
        refused = api.post("/any/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Lease": lease})
        assert refused.status_code == 400 and "X-Lease" in refused.json()["error"]
    finally:
        api.request("DELETE", "/main/lease", headers={"X-Lease": lease})


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Queue-Timeout": "0"}, {"X-Queue-Timeout": "3601"}, {"X-Queue-Timeout": "soon"},
        {"X-Queue-Timeout": "5", "X-Priority": "10"}, {"X-Queue-Timeout": "5", "X-Priority": "-1"},
        {"X-Queue-Timeout": "5", "X-Priority": "high"},
    ],
)
def test_bad_queue_headers_answer_400_and_start_nothing(api, headers):
    before = job_ids(api)
    response = api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "60", **headers})
    assert response.status_code == 400 and response.json()["success"] is False
    assert job_ids(api) == before


def test_queue_headers_on_a_plain_call_answer_400(api):
    response = api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Queue-Timeout": "5"})
    assert response.status_code == 400 and "X-Result-Ttl" in response.json()["error"]


def test_queued_jobs_survive_a_restart_in_order(make_worker):
    worker: WorkerProcess = make_worker(env=ENV)
    with worker.client() as api:
        holder = holding(api, seconds=600)
        waiting = [accepted(start(api, 0, tag=f"after-{n}", X_Queue_Timeout="120"))["job_id"] for n in range(2)]
        doomed = accepted(start(api, 0, tag="doomed", X_Queue_Timeout="1"))["job_id"]
        # A queued job under a lease, on a page of its own.
        assert api.post("/pages", json={"page_id": "leased"}).status_code == 201
        lease = api.post("/leased/lease", json={"ttl": 60}).json()["lease"]
        accepted(start(api, 600, page="leased", tag="leased-holder", X_Lease=lease))
        under_lease = accepted(start(api, 0, page="leased", X_Lease=lease, X_Queue_Timeout="120"))["job_id"]
    worker.stop()
    worker.start()
    with worker.client() as api:
        assert poll(api, holder)["state"] == "interrupted"  # it ran: interrupted, as the guide says
        results = [ended(api, job_id) for job_id in waiting]
        assert [body["result"]["tag"] for body in results] == ["after-0", "after-1"]
        assert results[0]["result"]["ended"] <= results[1]["result"]["started"]
        assert ended(api, doomed)["state"] == "timed_out"  # its deadline passed while the worker was down
        lost = ended(api, under_lease)
        assert lost["status"] == 423 and "lease" in lost["result"]["error"]
