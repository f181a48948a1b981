"""Async jobs against a real worker and a real webhook receiver, with the
webhook schedule scaled down to fractions of a second. What the API never
shows (delivery attempts, media files' names, request log rows) is read from
the worker's store through the ORM."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import httpx
import pytest

from activity.models import RequestLogEntry
from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from jobs.models import DeliveryAttempt
from media_store.models import MediaFile
from tests.conftest import worker_env
from tests.support.worker_store import WorkerStore

OFFSETS = [0.0, 0.5, 1.0, 1.5]
JOB_ENV = {
    "WEBHOOK_ATTEMPTS_S": ",".join(str(o) for o in OFFSETS),
    "WEBHOOK_TIMEOUT_S": "0.5",
    "MEDIA_AFTER_DELIVERY_S": "1",
    "SWEEP_S": "0.2",
    "MAX_PAGES": "4",
}
ACCEPTED_KEYS = {"success", "page_id", "job_id", "status_url", "ttl", "callback"}
JOB_KEYS = {
    "success", "page_id", "job_id", "state", "plugin", "started_at", "finished_at",
    "expires_in", "status", "result", "callback", "delivery", "progress",
}


def verify(body: bytes, signature: str, key: str) -> bool:
    """The guide's receiver check, as a client would write it."""
    expected = "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**JOB_ENV)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def receiver():
    with Receiver(hang_s=2) as running:
        yield running


@pytest.fixture(scope="module")
def worker_db(worker, django_db_blocker) -> WorkerStore:
    return WorkerStore(worker.store, django_db_blocker)


def recorded_attempts(worker_db: WorkerStore, job_id: str, count: int, *fields: str) -> list[tuple]:
    """The job's first `count` delivery attempts as they were recorded (their
    `fields`, the outcome if none given), in order: gathered while they are
    recorded, for an attempt is swept at the end of its job's webhook window
    (about 2 s after the job's end here)."""
    seen: dict[int, tuple] = {}
    attempts = DeliveryAttempt.objects.filter(job_id=job_id).values_list("number", *(fields or ("outcome",)))

    def gathered() -> bool:
        for number, *values in worker_db.list(attempts):
            seen[number] = tuple(values)
        return len(seen) >= count

    wait_until(gathered, timeout=20, what=f"{count} attempts of job {job_id}")
    return [seen[number] for number in sorted(seen)]


def job_ids(api: httpx.Client) -> set[str]:
    """The stored jobs' ids, as the job list answers them (every job not yet
    deleted, expired or not): "no job was started" is "no id is new" (an
    earlier test's webhook job may be delivered, and deleted, meanwhile)."""
    found: set[str] = set()
    params: dict = {"limit": 200}
    while True:
        answer = api.get("/jobs", params=params).json()
        found |= {job["job_id"] for job in answer["jobs"]}
        if answer["next"] is None:
            return found
        params["cursor"] = answer["next"]


def start(api: httpx.Client, action: str, params: dict | None = None, *, page: str = "main", ttl=None, callback=None, headers=None):
    job_headers = dict(headers or {})
    if ttl is not None:
        job_headers["X-Result-Ttl"] = str(ttl)
    if callback is not None:
        job_headers["X-Callback-Url"] = callback
    return api.post(f"/{page}/plugin/{action}", json=params or {}, headers=job_headers)


def started(api, action, params=None, **kwargs) -> str:
    response = start(api, action, params, **kwargs)
    assert response.status_code == 202, response.text
    return response.json()["job_id"]


def ended(api: httpx.Client, job_id: str, timeout: float = 20) -> dict:
    def poll():
        body = api.get(f"/jobs/{job_id}").json()
        return body if body.get("state") in ("done", "interrupted") else None

    return wait_until(poll, timeout=timeout, what=f"job {job_id} to end")


def page_idle(api: httpx.Client, page: str = "main") -> None:
    wait_until(lambda: not api.get(f"/{page}").json()["busy"], timeout=20, what=f"page {page} to be idle")


# --- starting -----------------------------------------------------------------------


def test_a_polling_job_answers_202_then_running_then_done(api):
    response = start(api, "testing/sleep", {"seconds": 0.5, "tag": "t"}, ttl=60)
    assert response.status_code == 202
    accepted = response.json()
    assert set(accepted) == ACCEPTED_KEYS
    job_id = accepted["job_id"]
    assert len(job_id) == 16 and int(job_id, 16) >= 0
    assert accepted == {
        "success": True, "page_id": "main", "job_id": job_id,
        "status_url": f"/api/v1/jobs/{job_id}", "ttl": 60.0, "callback": None,
    }
    running = api.get(accepted["status_url"].removeprefix("/api/v1")).json()
    assert set(running) == JOB_KEYS
    assert running["state"] == "running" and running["plugin"] == "testing/sleep"
    assert running["finished_at"] is None and running["expires_in"] is None
    assert running["status"] is None and running["result"] is None
    assert running["callback"] is None and running["delivery"] is None
    done = ended(api, job_id)
    assert set(done) == JOB_KEYS
    assert done["status"] == 200 and done["result"]["success"] is True and done["result"]["tag"] == "t"
    assert done["finished_at"] >= done["started_at"]
    assert 0 < done["expires_in"] <= 60
    again = api.get(f"/jobs/{job_id}").json()
    assert again["result"] == done["result"] and again["expires_in"] <= done["expires_in"]


def test_a_webhook_job_answers_202_with_its_callback(api, receiver):
    url = receiver.url + "/200/accepted"
    response = start(api, "web/state", callback=url)
    assert response.status_code == 202
    assert response.json()["ttl"] is None and response.json()["callback"] == url
    wait_until(lambda: receiver.received("/200/accepted"), what="the webhook")


def test_status_and_result_are_exactly_the_plain_calls(api, site):
    api.get("/main/plugin/web/open", params={"url": site.url + "/index.html"})
    cases = [
        ("web/state", {}),
        ("web/text", {"selector": "#heading"}),
        ("web/text", {"selector": "#missing"}),  # 404 from the action
        ("testing/refuse", {}),  # the framework error
        ("testing/crash", {}),  # 500
        ("testing/overrun", {}),  # 408
        ("testing/nan", {}),  # a result that is not strict JSON: 500, and the job still ends
    ]
    for action, params in cases:
        plain = api.post(f"/main/plugin/{action}", json=params)
        job = ended(api, started(api, action, params, ttl=60))
        assert (job["status"], job["result"]) == (plain.status_code, plain.json()), action


def test_get_parameters_work_for_jobs_too(api):
    response = api.get("/main/plugin/testing/sleep", params={"seconds": "0", "tag": "q"}, headers={"X-Result-Ttl": "30"})
    assert response.status_code == 202
    assert ended(api, response.json()["job_id"])["result"]["tag"] == "q"


# --- bad headers start nothing ------------------------------------------------------


@pytest.mark.parametrize("ttl", ["0", "-1", "601", "abc", "1e309", "nan", "inf", "", "60,60", "0x10"])
def test_a_bad_ttl_answers_400_and_starts_nothing(api, worker, ttl):
    before = job_ids(api)
    response = api.post("/main/plugin/web/state", headers={"X-Result-Ttl": ttl})
    assert response.status_code == 400, response.text
    assert "X-Result-Ttl" in response.json()["error"]
    assert not job_ids(api) - before and not api.get("/main").json()["busy"]


def test_a_decimal_ttl_is_taken(api):
    response = start(api, "web/state", ttl="0.75")
    assert response.status_code == 202 and response.json()["ttl"] == 0.75


@pytest.mark.parametrize(
    "callback",
    ["/relative", "ftp://example.com/x", "javascript:alert(1)", "http://", "https:///path", "http://exa mple.com/",
     "http://example.com/" + "a" * 10_000, "example.com/hook", "http://example.com:99999/", ""],
)
def test_a_bad_callback_answers_400_and_starts_nothing(api, worker, callback):
    before = job_ids(api)
    response = api.post("/main/plugin/web/state", headers={"X-Callback-Url": callback})
    assert response.status_code == 400, response.text
    assert not job_ids(api) - before


def test_both_headers_answer_400(api, worker, receiver):
    before = job_ids(api)
    response = start(api, "web/state", ttl=60, callback=receiver.url + "/200/both")
    assert response.status_code == 400 and "not both" in response.json()["error"]
    assert not job_ids(api) - before


def test_plain_checks_run_first_and_start_nothing(api, worker):
    before = job_ids(api)
    headers = {"X-Result-Ttl": "60"}
    assert httpx.post(worker.base_url + "/api/v1/main/plugin/web/state", headers=headers).status_code == 401
    assert api.post("/main/plugin/web/open", json={}, headers=headers).status_code == 400
    bad_json = {**headers, "Content-Type": "application/json"}
    assert api.post("/main/plugin/web/open", content=b"{", headers=bad_json).status_code == 422
    assert api.post("/nowhere/plugin/web/state", headers=headers).status_code == 404
    assert api.post("/main/plugin/web/nope", headers=headers).status_code == 404
    lease = api.post("/main/lease", json={"ttl": 30}).json()["lease"]
    try:
        assert api.post("/main/plugin/web/state", headers=headers).status_code == 423
        assert api.post("/main/plugin/web/state", headers={**headers, "X-Lease": "wrong"}).status_code == 423
    finally:
        api.delete("/main/lease", headers={"X-Lease": lease})
    assert not job_ids(api) - before


def test_jobs_are_only_for_plugin_routes(api, worker):
    before = job_ids(api)
    assert api.post("/main/primitive/content", headers={"X-Result-Ttl": "60"}).status_code == 400
    assert api.get("/pages", headers={"X-Result-Ttl": "60"}).status_code == 200
    assert not job_ids(api) - before


# --- one job per page ------------------------------------------------------------


def test_one_job_per_page_and_others_wait_for_it(api, worker):
    page_idle(api)
    job_id = started(api, "testing/sleep", {"seconds": 1}, ttl=60)
    before = job_ids(api)
    refused = start(api, "web/state", ttl=60)
    assert refused.status_code == 409
    assert refused.json() == {"success": False, "error": f"Page main already runs job {job_id}.", "page_id": "main"}
    assert not job_ids(api) - before
    # A plain call waits for the job like for any busy page (PAGE_WAIT_S is 2).
    assert api.get("/main").json()["job_id"] == job_id
    assert api.get("/main/plugin/web/state").status_code == 200
    assert ended(api, job_id)["status"] == 200


def test_a_job_is_refused_at_once_while_a_plain_call_runs(worker):
    import threading

    with worker.client() as api:
        page_idle(api)
        plain = threading.Thread(target=lambda: api.get("/main/plugin/testing/sleep", params={"seconds": 1}))
        plain.start()
        wait_until(lambda: api.get("/main").json()["busy"], what="the plain call to hold the page")
        refused = start(api, "web/state", ttl=60)
        plain.join()
    assert refused.status_code == 409 and "not idle" in refused.json()["error"]


def test_a_caller_waits_at_most_page_wait_s_for_a_job(api):
    page_idle(api)
    job_id = started(api, "testing/sleep", {"seconds": 3}, ttl=60)
    response = api.get("/main/plugin/web/state")
    assert response.status_code == 409 and response.json()["error"] == f"Page main is busy: job {job_id} runs on it."
    ended(api, job_id)


def test_jobs_on_several_pages_run_at_once(api):
    page_idle(api)
    api.post("/pages", json={"page_id": "second"})
    try:
        first = started(api, "testing/sleep", {"seconds": 0.5}, ttl=60)
        second = started(api, "testing/sleep", {"seconds": 0.5}, ttl=60, page="second")
        a, b = ended(api, first)["result"], ended(api, second)["result"]
        assert a["started"] < b["ended"] and b["started"] < a["ended"]  # they overlapped
    finally:
        page_idle(api, "second")
        api.delete("/second")


def test_past_max_jobs_answers_503(make_worker):
    worker = make_worker(env={**JOB_ENV, "MAX_JOBS": "3"})
    with worker.client() as api:
        for _ in range(3):
            ended(api, started(api, "web/state", ttl=60))
        response = start(api, "web/state", ttl=60)
        assert response.status_code == 503 and "MAX_JOBS" in response.json()["error"]
        assert not api.get("/main").json()["busy"]
        held = job_ids(api)
        assert len(held) == 3
        # A client done with a result forgets its job: the place is free again.
        held = held.pop()
        assert api.delete(f"/jobs/{held}").status_code == 204
        assert start(api, "web/state", ttl=60).status_code == 202


# --- polling expiry ----------------------------------------------------------------------


def test_a_polled_result_expires_after_its_ttl(api, worker):
    job_id = started(api, "web/state", ttl=0.5)
    ended(api, job_id)
    wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, timeout=5, what="the result to expire")
    body = api.get(f"/jobs/{job_id}").json()
    assert body["success"] is False and body["page_id"] is None
    wait_until(lambda: job_id not in job_ids(api), what="the sweep")


@pytest.mark.parametrize("job_id", ["0000000000000000", "nope", "..%2F..%2Fetc%2Fpasswd", "'; drop table jobs_job; --", "A" * 16])
def test_unknown_or_malformed_job_ids_answer_404(api, job_id):
    for response in (api.get(f"/jobs/{job_id}"), api.delete(f"/jobs/{job_id}")):
        assert response.status_code == 404 and response.json()["success"] is False


# --- forgetting a job early -----------------------------------------------------------------


def test_an_ended_job_is_forgotten_at_once_with_its_files(api, worker, worker_db):
    job_id = started(api, "testing/media", {"size": 1000}, ttl=60)
    token = ended(api, job_id)["result"]["media"]["url"].rsplit("/", 1)[1]
    [name] = media_path(worker_db, token)
    assert (worker.store / "media" / name).exists()
    forgotten = api.delete(f"/jobs/{job_id}")
    assert forgotten.status_code == 204 and forgotten.content == b""
    assert api.get(f"/jobs/{job_id}").status_code == 404
    assert job_id not in job_ids(api)
    assert media_path(worker_db, token) == [] and not (worker.store / "media" / name).exists()
    assert api.get(f"/media/{token}").status_code == 404
    again = api.delete(f"/jobs/{job_id}")
    assert again.status_code == 404 and again.json()["error"].startswith("No such job")


def test_a_running_job_is_not_forgotten(api, worker):
    page_idle(api)
    job_id = started(api, "testing/sleep", {"seconds": 1}, ttl=60)
    refused = api.delete(f"/jobs/{job_id}")
    assert refused.status_code == 409
    assert refused.json() == {"success": False, "error": f"Job {job_id} is still running; cancel it first.", "page_id": "main"}
    assert ended(api, job_id)["status"] == 200  # it ran on to its end
    assert api.delete(f"/jobs/{job_id}").status_code == 204


# --- webhooks --------------------------------------------------------------------------


def test_the_webhook_posts_the_job_signed_then_deletes_it(api, worker, worker_db, receiver):
    url = receiver.url + "/200/signed"
    job_id = started(api, "testing/sleep", {"seconds": 0.1, "tag": "hook"}, callback=url)
    wait_until(lambda: receiver.received("/200/signed"), what="the webhook")
    [hit] = receiver.received("/200/signed")
    assert hit.headers["Content-Type"] == "application/json"
    assert hit.headers["X-Penelope-Job"] == job_id
    assert hit.headers["X-Penelope-Attempt"] == "1"
    assert verify(hit.body, hit.headers["X-Penelope-Signature"], worker.key)
    assert not verify(hit.body + b" ", hit.headers["X-Penelope-Signature"], worker.key)
    body = json.loads(hit.body)
    assert set(body) == JOB_KEYS
    assert body["job_id"] == job_id and body["state"] == "done" and body["status"] == 200
    assert body["result"]["tag"] == "hook" and body["callback"] == url
    assert body["delivery"] == {"attempts": 1, "delivered": False, "error": None}
    assert body["expires_in"] > 0
    wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, what="the delivered job to go")
    assert recorded_attempts(worker_db, job_id, 1, "number", "outcome", "status_code") == [(1, "delivered", 200)]


def attempts_to(worker, worker_db, api, receiver, scenario: str, expected_outcomes: list[str]) -> tuple[str, list]:
    """Start a webhook job that stores a file, on a receiver path, and wait for
    all its attempts; then check the file went as it should."""
    path = f"/{scenario}/{time.monotonic_ns()}"
    page_idle(api)
    job_id = started(api, "testing/sleep", {"seconds": 0, "media_size": 100}, callback=receiver.url + path)
    outcomes = [outcome for (outcome,) in recorded_attempts(worker_db, job_id, len(expected_outcomes))]
    assert outcomes == expected_outcomes
    hits = receiver.received(path)
    token = json.loads(hits[0].body)["result"]["media"]["url"].rsplit("/", 1)[1]
    if outcomes[-1] == "gave_up":
        assert media_path(worker_db, token) == []  # dropped with the job, at once
    else:  # kept MEDIA_AFTER_DELIVERY_S (1 s here), then swept
        wait_until(lambda: not media_path(worker_db, token), timeout=10, what="the delivered job's file to go")
    # Files are unlinked just after the commit that drops their rows, so a file
    # may briefly outlive its row; none may stay without one.
    wait_until(
        lambda: {f.name for f in (worker.store / "media").iterdir()}
        <= set(worker_db.list(MediaFile.objects.values_list("path", flat=True))),
        timeout=5, what="every file in the media folder to have its row",
    )
    return job_id, hits


@pytest.mark.parametrize(
    "scenario, outcomes",
    [
        ("500,503,200", ["retry", "retry", "delivered"]),
        ("429,200", ["retry", "delivered"]),
        ("500", ["retry", "retry", "retry", "gave_up"]),
        ("503", ["retry", "retry", "retry", "gave_up"]),
        ("503,429,500,204", ["retry", "retry", "retry", "delivered"]),
        ("slow", ["delivered"]),
        ("hang,200", ["retry", "delivered"]),
        ("reset,200", ["retry", "delivered"]),
        ("huge", ["delivered"]),
    ],
)
def test_the_attempt_schedule_and_each_class_of_answer(api, worker, worker_db, receiver, scenario, outcomes):
    job_id, hits = attempts_to(worker, worker_db, api, receiver, scenario, outcomes)
    finished_at = json.loads(hits[0].body)["finished_at"]
    assert [h.headers["X-Penelope-Attempt"] for h in hits] == [str(n) for n in range(1, len(outcomes) + 1)]
    for hit, offset in zip(hits, OFFSETS, strict=False):
        assert hit.at >= finished_at + offset - 0.01  # never before its slot
    assert [json.loads(h.body)["delivery"]["attempts"] for h in hits] == list(range(1, len(outcomes) + 1))
    assert len({h.headers["X-Penelope-Job"] for h in hits}) == 1
    if len(hits) > 1:
        assert json.loads(hits[1].body)["delivery"]["error"] is not None
    assert api.get(f"/jobs/{job_id}").status_code == 404
    assert job_id not in job_ids(api)


@pytest.mark.parametrize("scenario", ["404", "410", "400", "redirect"])
def test_a_final_answer_gives_up_at_once(api, worker, worker_db, receiver, scenario):
    job_id, hits = attempts_to(worker, worker_db, api, receiver, scenario, ["gave_up"])
    assert len(hits) == 1
    assert api.get(f"/jobs/{job_id}").status_code == 404
    assert not receiver.received("/200/redirected")  # the redirect was not followed


def test_a_refused_connection_is_tried_four_times(api, worker, worker_db):
    page_idle(api)
    closed_port = WorkerProcess(worker.store).port  # a free port nobody listens on
    job_id = started(api, "web/state", callback=f"http://127.0.0.1:{closed_port}/hook")
    outcomes = recorded_attempts(worker_db, job_id, 4, "number", "outcome", "error")
    assert [(n, o) for n, o, _ in outcomes] == [(1, "retry"), (2, "retry"), (3, "retry"), (4, "gave_up")]
    assert all("network error" in e for _, _, e in outcomes)


def test_a_poll_shows_a_webhook_job_while_it_waits(api, receiver):
    path = f"/500/{time.monotonic_ns()}"
    job_id = started(api, "web/state", callback=receiver.url + path)
    wait_until(lambda: receiver.received(path), what="the first attempt")
    # The POST counts as made when it is sent; its failure is recorded when its answer is in.
    body = wait_until(lambda: (b := api.get(f"/jobs/{job_id}").json()).get("delivery", {}).get("error") and b)
    assert body["delivery"]["attempts"] >= 1  # the next attempt is due 0.5 s after the first
    assert body["delivery"]["delivered"] is False and "500" in body["delivery"]["error"]
    assert body["callback"] == receiver.url + path


# --- media ------------------------------------------------------------------------------


def media_path(worker_db: WorkerStore, token: str) -> list[str]:
    """The name of the link's file in the media folder; none once its row is gone."""
    return worker_db.list(MediaFile.objects.filter(token=token).values_list("path", flat=True))


def test_a_polling_job_holds_its_media_until_its_result_expires(api, worker, worker_db):
    job_id = started(api, "testing/media", {"size": 1000}, ttl=1.5)
    result = ended(api, job_id)["result"]
    link = result["media"]
    token = link["url"].rsplit("/", 1)[1]
    [created] = worker_db.list(MediaFile.objects.filter(token=token).values_list("created_at", flat=True))
    assert link["expires_at"] == pytest.approx(created + 300, abs=0.01)  # the plain call's 300 s
    for _ in range(2):  # readable any number of times while held
        download = api.get(link["url"].removeprefix("/api/v1"))
        assert download.status_code == 200 and len(download.content) == 1000
    [name] = media_path(worker_db, token)
    wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, what="the result to expire")
    wait_until(lambda: not media_path(worker_db, token) and not (worker.store / "media" / name).exists(), what="the file to go")


def test_a_file_stored_early_in_a_long_job_outlives_its_own_link_time(make_worker):
    # The file's plain link would lapse after MEDIA_TTL_S, long before the job ends.
    worker = make_worker(env={**JOB_ENV, "MEDIA_TTL_S": "0.3", "SWEEP_S": "0.1"})
    with worker.client() as api:
        job_id = started(api, "testing/sleep", {"seconds": 1.5, "media_size": 50, "media_first": True}, ttl=60)
        link = ended(api, job_id)["result"]["media"]["url"]
        download = api.get(link.removeprefix("/api/v1"))
        assert download.status_code == 200 and len(download.content) == 50


def test_a_delivered_job_keeps_its_media_a_while_more(api, worker, receiver):
    path = f"/200/{time.monotonic_ns()}"
    job_id = started(api, "testing/media", {"size": 10}, callback=receiver.url + path)
    wait_until(lambda: receiver.received(path), what="the webhook")
    link = json.loads(receiver.received(path)[0].body)["result"]["media"]["url"]
    wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, what="the job to go")
    assert api.get(link.removeprefix("/api/v1")).status_code == 200  # MEDIA_AFTER_DELIVERY_S is 1
    wait_until(lambda: api.get(link.removeprefix("/api/v1")).status_code == 404, what="the media to go")


def test_a_given_up_job_drops_its_media_at_once(api, worker_db, receiver):
    path = f"/404/{time.monotonic_ns()}"
    job_id = started(api, "testing/media", {"size": 10}, callback=receiver.url + path)
    wait_until(lambda: receiver.received(path), what="the webhook")
    token = json.loads(receiver.received(path)[0].body)["result"]["media"]["url"].rsplit("/", 1)[1]
    wait_until(lambda: job_id not in job_ids(api), what="the job to go")
    assert media_path(worker_db, token) == []
    assert api.get(f"/media/{token}").status_code == 404


# --- leases ------------------------------------------------------------------------------


def test_a_job_runs_under_its_lease_which_outlives_its_ttl_while_it_works(api):
    page_idle(api)
    taken_at = time.monotonic()
    lease = api.post("/main/lease", json={"ttl": 0.4}).json()["lease"]
    job_id = started(api, "testing/sleep", {"seconds": 1.5}, ttl=60, headers={"X-Lease": lease})
    wait_until(lambda: time.monotonic() > taken_at + 0.6, what="the lease's own TTL to pass")
    assert api.get(f"/jobs/{job_id}").json()["state"] == "running"
    assert api.get("/main").json()["leased"] is True
    assert api.post("/main/plugin/web/state").status_code == 423
    ended(api, job_id)
    # Polls do not renew it: its TTL restarted when the job ended, and runs out.
    wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 200 and not api.get("/main").json()["leased"],
               timeout=5, what="the lease to run out after the job")
    assert api.get("/main/plugin/web/state", headers={"X-Lease": lease}).status_code == 423


# --- the request log and the workload ---------------------------------------------------


def test_a_job_logs_its_202_and_a_pair_of_job_rows_and_counts_once_in_the_workload(api, worker_db):
    page_idle(api)
    job_id = started(api, "testing/sleep", {"seconds": 0.3}, ttl=60)
    ended(api, job_id)

    logged = RequestLogEntry.objects.filter(job_id=job_id).order_by("status")

    def job_rows():
        found = worker_db.list(logged.values_list("kind", "route", "status", "duration_ms"))
        return found if len(found) == 2 else None

    start_row, end_row = wait_until(job_rows, what="the job's two rows")
    assert start_row[:3] == ("job", "plugin/testing/sleep", None)
    assert end_row[:3] == ("job", "plugin/testing/sleep", 200) and end_row[3] >= 300
    assert worker_db.exists(RequestLogEntry.objects.filter(kind="http", status=202, route="plugin/testing/sleep"))
    routes = api.get("/workload").json()["routes"]
    sleeps = {r["kind"]: r for r in routes if r["route"] == "plugin/testing/sleep"}
    assert sleeps["job"]["statuses"].get("200", 0) >= 1
    assert "202" not in sleeps.get("http", {"statuses": {}})["statuses"]


def test_activity_counts_jobs_until_they_end_and_webhooks_until_delivered(api, receiver):
    page_idle(api)
    job_id = started(api, "testing/sleep", {"seconds": 0.5}, ttl=60)
    assert api.get("/activity").json()["jobs_in_flight"] >= 1
    ended(api, job_id)
    wait_until(lambda: api.get("/activity").json()["jobs_in_flight"] == 0, what="the polling job to stop counting")
    path = f"/500,500,500,200/{time.monotonic_ns()}"
    hooked = started(api, "web/state", callback=receiver.url + path)
    ended(api, hooked)
    assert api.get("/activity").json()["webhooks_pending"] == 1
    wait_until(lambda: api.get(f"/jobs/{hooked}").status_code == 404, what="the delivery")
    assert api.get("/activity").json()["webhooks_pending"] == 0


def test_delivery_history_goes_with_its_job_and_logs_show_no_credentials_of_a_callback(api, worker, worker_db, receiver):
    # A receiver URL with credentials in its user-info and its query string.
    callback = receiver.url.replace("http://", "http://hooks:hunter2@") + "/500,200/credentials?token=s3cret&x=1"
    shown = receiver.url + "/500,200/credentials?…"
    page_idle(api)
    job_id = started(api, "web/state", callback=callback)
    assert recorded_attempts(worker_db, job_id, 2) == [("retry",), ("delivered",)]
    assert f"webhook {job_id} attempt 1 to {shown}: retry (the receiver answered HTTP 500)" in worker.log()
    # The log line follows the outcome's commit.
    delivered = f"webhook {job_id} attempt 2 to {shown}: delivered (200)"
    wait_until(lambda: delivered in worker.log(), what="the delivery's log line")
    assert "hunter2" not in worker.log() and "s3cret" not in worker.log()
    # The history is swept at the end of the job's webhook window (2 s here), never kept for ever.
    wait_until(lambda: not worker_db.exists(DeliveryAttempt.objects.filter(job_id=job_id)), timeout=20,
               what="the delivered job's attempts to be swept")

    # A job a client forgets takes its history with it at once.
    forgotten = started(api, "web/state", callback=receiver.url + "/500/forgotten")
    recorded_attempts(worker_db, forgotten, 1)
    assert api.delete(f"/jobs/{forgotten}").status_code == 204
    assert not worker_db.exists(DeliveryAttempt.objects.filter(job_id=forgotten))
