"""Retries (X-Retry) and re-runs (POST /jobs/{id}/rerun) against a real
worker, a real browser and a real webhook receiver. The `testing/flaky`
plugin counts its attempts in a file of the test's own, so a count survives
the worker's restart."""

from __future__ import annotations

import json

import pytest

from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.test_jobs import job_ids

ENV = {"WEBHOOK_ATTEMPTS_S": "0", "WEBHOOK_TIMEOUT_S": "2", "CANCEL_GRACE_S": "0.5"}
LIVE = ("queued", "running")


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**ENV)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as running:
        yield running


def flaky(api, tmp_path, failures: int, *, retry: str | None = "3", backoff: str = "0.05", callback: str | None = None,
          status: int = 503, plugin_retry: bool | None = None, hold_first: bool = False, **headers: str):
    sent = {"X-Callback-Url": callback} if callback else {"X-Result-Ttl": "60"}
    if retry is not None:
        sent.update({"X-Retry": retry, "X-Retry-Backoff": backoff})
    sent.update({name.replace("_", "-"): value for name, value in headers.items()})
    params = {"path": str(tmp_path / "attempts"), "failures": failures, "status": status, "retry": plugin_retry,
              "hold_first": hold_first}
    response = api.post("/main/plugin/testing/flaky", json=params, headers=sent)
    assert response.status_code == 202, response.text
    return response.json()


def ended(api, job_id: str, timeout: float = 30) -> dict:
    return wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}").json()) and body["state"] not in LIVE and body,
        timeout=timeout, what=f"job {job_id} to end",
    )


def attempts_made(tmp_path) -> int:
    path = tmp_path / "attempts"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_flaky_plugin_that_fails_twice_ends_done_with_three_attempts_and_one_delivery(api, receiver, tmp_path):
    url = receiver.url + "/200/flaky"
    job_id = flaky(api, tmp_path, 2, callback=url)["job_id"]
    # The delivered body is the job as a poll showed it at its end; the row goes
    # once delivered, so polling for the end could meet the delivery first.
    delivered = wait_until(lambda: [r for r in receiver.requests if r.path == "/200/flaky"], what="the delivery")
    job = json.loads(delivered[0].body)
    assert job["job_id"] == job_id and job["state"] == "done" and job["status"] == 200 and job["result"]["attempt"] == 3
    assert job["attempt"] == 3 and job["next_attempt_at"] is None
    assert [attempt["status"] for attempt in job["attempts"]] == [503, 503, 200]
    for earlier, later in zip(job["attempts"], job["attempts"][1:], strict=False):
        assert earlier["started_at"] <= earlier["finished_at"] <= later["started_at"]
    assert job["attempts"][-1]["finished_at"] == job["finished_at"]
    # Only the job's end is delivered: no attempt's failure was POSTed.
    wait_until(lambda: api.get(f"/jobs/{job['job_id']}").status_code == 404, what="the delivered job to go")
    assert len([r for r in receiver.requests if r.path == "/200/flaky"]) == 1


@pytest.mark.serial  # each back-off within 0.3 s of its slot: a time bound (pytest.ini)
def test_the_back_off_doubles_within_its_jitter_and_a_poll_shows_the_wait(api, tmp_path):
    job_id = flaky(api, tmp_path, 2, retry="2", backoff="0.5")["job_id"]
    waiting = wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}").json())["state"] == "queued" and body, what="the first back-off"
    )
    assert waiting["attempt"] == 2 and waiting["status"] is None and waiting["result"] is None
    assert [attempt["status"] for attempt in waiting["attempts"]] == [503]
    assert waiting["next_attempt_at"] > waiting["attempts"][0]["finished_at"]
    job = ended(api, job_id)
    first, second, third = job["attempts"]
    # S x 2^(k-1), within 20 %: at least that, and at most that plus the turn's own start.
    assert 0.4 <= second["started_at"] - first["finished_at"] <= 0.6 + 0.3
    assert 0.8 <= third["started_at"] - second["finished_at"] <= 1.2 + 0.3
    assert job["status"] == 200


@pytest.mark.parametrize(
    ("status", "plugin_retry", "attempts"),
    [
        (404, None, 1),  # a 4xx is final
        (500, None, 1),  # so is the plugin's crash
        (418, True, 2),  # unless the plugin says it is worth another
        (503, False, 1),  # and a transient status is final when the plugin says so
        (408, None, 2),
    ],
)
def test_which_failures_are_retried(api, tmp_path, status, plugin_retry, attempts):
    job = ended(api, flaky(api, tmp_path, 1, retry="1", status=status, plugin_retry=plugin_retry)["job_id"])
    assert len(job["attempts"]) == attempts == attempts_made(tmp_path)
    assert job["status"] == (200 if attempts == 2 else status)


def test_exhausted_retries_end_with_the_last_attempts_answer(api, tmp_path):
    job = ended(api, flaky(api, tmp_path, 5, retry="2")["job_id"])
    assert job["state"] == "done" and job["status"] == 503 and job["attempt"] == 3
    assert job["result"] == {"success": False, "error": "Attempt 3 fails on purpose.", "page_id": "main"}
    assert attempts_made(tmp_path) == 3


def test_a_job_cancelled_during_its_back_off_ends_cancelled_at_once(api, tmp_path):
    job_id = flaky(api, tmp_path, 2, retry="2", backoff="60")["job_id"]
    wait_until(lambda: api.get(f"/jobs/{job_id}").json()["state"] == "queued", what="the back-off")
    cancelled = api.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled" and cancelled.json()["status"] == 499
    assert attempts_made(tmp_path) == 1


def test_a_retry_whose_page_was_closed_or_leased_during_its_back_off_ends_saying_so(api, tmp_path):
    assert api.post("/pages", json={"page_id": "brief"}).status_code in (200, 201)
    params = {"path": str(tmp_path / "closed"), "failures": 1, "status": 503}
    sent = {"X-Result-Ttl": "60", "X-Retry": "1", "X-Retry-Backoff": "0.5"}
    closed = api.post("/brief/plugin/testing/flaky", json=params, headers=sent).json()["job_id"]
    wait_until(lambda: api.get(f"/jobs/{closed}").json()["state"] == "queued", what="the back-off")
    assert api.delete("/brief").status_code == 200
    job = ended(api, closed, timeout=10)  # at the back-off's end, not after a wait in line
    assert job["status"] == 404 and "closed" in job["result"]["error"]

    params["path"] = str(tmp_path / "leased")
    leased = api.post("/main/plugin/testing/flaky", json=params, headers=sent).json()["job_id"]
    wait_until(lambda: api.get(f"/jobs/{leased}").json()["state"] == "queued", what="the back-off")
    lease = api.post("/main/lease", json={"ttl": 30}).json()["lease"]
    try:
        job = ended(api, leased, timeout=10)
        assert job["status"] == 423 and [attempt["status"] for attempt in job["attempts"]] == [503]  # the second never ran
    finally:
        api.delete("/main/lease", headers={"X-Lease": lease})


def test_a_job_without_x_retry_answers_as_the_guide_shows_it(api, tmp_path):
    job = ended(api, flaky(api, tmp_path, 1, retry=None)["job_id"])
    assert job["status"] == 503
    assert not {"attempt", "attempts", "next_attempt_at", "rerun_of"} & set(job)


def test_demo_flaky_fails_its_first_attempts_and_a_retry_sees_it_through(api):
    """The guides' example: demo/flaky counts with its job's attempt number."""
    sent = {"X-Result-Ttl": "60", "X-Retry": "2", "X-Retry-Backoff": "0.05"}
    response = api.post("/main/plugin/demo/flaky", json={"fail_times": 1}, headers=sent)
    assert response.status_code == 202, response.text
    job = ended(api, response.json()["job_id"])
    assert job["state"] == "done" and job["status"] == 200 and job["attempt"] == 2
    assert job["result"] == {"success": True, "page_id": "main", "attempt": 2}
    assert [attempt["status"] for attempt in job["attempts"]] == [503, 200]

    # Without X-Retry the first attempt's failure is the job's end.
    plain = api.post("/main/plugin/demo/flaky", json={"fail_times": 1, "status": 502}, headers={"X-Result-Ttl": "60"})
    job = ended(api, plain.json()["job_id"])
    assert job["state"] == "done" and job["status"] == 502 and "attempts" not in job
    assert job["result"]["error"] == "demo/flaky fails attempt 1 on purpose (fail_times=1)."
    # A plain call is a first attempt; a status a retry would not try again is refused.
    assert api.get("/main/plugin/demo/flaky", params={"fail_times": "0"}).json()["attempt"] == 1
    refused = api.get("/main/plugin/demo/flaky", params={"status": "500"})
    assert refused.status_code == 400 and "status" in refused.json()["error"]


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Retry": "0"}, {"X-Retry": "11"}, {"X-Retry": "01"}, {"X-Retry": "two"}, {"X-Retry": "1.5"},
        {"X-Retry": "2", "X-Retry-Backoff": "0"}, {"X-Retry": "2", "X-Retry-Backoff": "601"},
        {"X-Retry": "2", "X-Retry-Backoff": "1e2"}, {"X-Retry-Backoff": "5"},
    ],
)
def test_bad_retry_headers_answer_400_naming_them_and_start_nothing(api, tmp_path, headers):
    before = job_ids(api)
    response = api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "60", **headers})
    assert response.status_code == 400, response.text
    assert any(name in response.json()["error"] for name in headers)
    assert job_ids(api) == before


def test_retry_headers_on_a_plain_call_answer_400(api):
    response = api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Retry": "2"})
    assert response.status_code == 400 and "X-Retry" in response.json()["error"]


# --- re-runs --------------------------------------------------------------------------------


def test_a_rerun_starts_the_same_request_as_a_new_job(api, tmp_path):
    first = ended(api, flaky(api, tmp_path, 0, retry="2", X_Priority="3")["job_id"])
    response = api.post(f"/jobs/{first['job_id']}/rerun")
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["rerun_of"] == first["job_id"] and accepted["job_id"] != first["job_id"]
    assert accepted["ttl"] == 60 and accepted["status_url"] == f"/api/v1/jobs/{accepted['job_id']}"
    again = ended(api, accepted["job_id"])
    # The same parameters: the plugin counted its second attempt in the same file.
    assert again["result"]["attempt"] == 2 and again["rerun_of"] == first["job_id"]
    assert again["plugin"] == "testing/flaky" and again["page_id"] == "main" and len(again["attempts"]) == 1
    assert api.get("/jobs", params={"limit": 200}).json()["jobs"][0]["rerun_of"] == first["job_id"]


def test_a_running_job_cannot_be_rerun_and_an_unknown_one_is_404(api):
    job_id = api.post("/main/plugin/testing/sleep", json={"seconds": 30}, headers={"X-Result-Ttl": "60"}).json()["job_id"]
    try:
        before = job_ids(api)
        refused = api.post(f"/jobs/{job_id}/rerun")
        assert refused.status_code == 409 and "running" in refused.json()["error"]
        assert job_ids(api) == before
    finally:
        api.post(f"/jobs/{job_id}/cancel")
    assert api.post("/jobs/0123456789abcdef/rerun").status_code == 404
    assert api.post("/jobs/not-a-job/rerun").status_code == 404


# --- restarts ---------------------------------------------------------------------------------


def test_a_restart_mid_attempt_queues_the_job_again_and_it_ends_once(make_worker, tmp_path):
    with Receiver() as receiver:
        worker = make_worker(ENV)
        with worker.client() as api:
            url = receiver.url + "/200/restart"
            retried = flaky(api, tmp_path, 0, retry="1", hold_first=True, callback=url)["job_id"]
            plain = api.post("/any/plugin/testing/sleep", json={"seconds": 60}, headers={"X-Result-Ttl": "60"})
            wait_until(lambda: attempts_made(tmp_path) == 1, what="the first attempt to start")
        worker.stop()
        worker.start()
        delivered = wait_until(lambda: [r for r in receiver.requests if r.path == "/200/restart"], what="the delivery")
        job = json.loads(delivered[0].body)
        assert job["job_id"] == retried and job["state"] == "done" and job["status"] == 200
        assert job["result"]["attempt"] == 2 and attempts_made(tmp_path) == 2
        assert [attempt["status"] for attempt in job["attempts"]] == [503, 200]
        with worker.client() as api:
            # Without X-Retry the guide's answer stands.
            assert api.get(f"/jobs/{plain.json()['job_id']}").json()["state"] == "interrupted"
            wait_until(lambda: api.get(f"/jobs/{retried}").status_code == 404, what="the delivered job to go")
        assert len([r for r in receiver.requests if r.path == "/200/restart"]) == 1
