"""The event stream, `ws://HOST/api/v1/events`, read by real WebSocket
clients from a real worker: order, filters, refusals, the connection cap,
coalesced progress and a stuck client's overflow."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.support.raw_socket import RawSocket

ENV = {
    "WEBHOOK_ATTEMPTS_S": "0,0.5",
    "WEBHOOK_TIMEOUT_S": "0.5",
    "MAX_EVENT_SOCKETS": "3",
    "EVENT_SOCKET_QUEUE": "20",
    "MAX_PAGES": "4",
}
JOB_EVENT_KEYS = {"id", "event", "at", "page_id", "job_id", "job"}


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**ENV)).start()
    try:
        with running.client() as api:
            for page in ("ev", "other"):
                assert api.post("/pages", json={"page_id": page}).status_code == 201
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as running:
        yield running


def ws_url(worker: WorkerProcess, query: str = "") -> str:
    return f"ws://127.0.0.1:{worker.port}/api/v1/events" + (f"?{query}" if query else "")


@contextmanager
def events(worker: WorkerProcess, query: str = "", key: str | None = None):
    with connect(ws_url(worker, query), additional_headers={"Authorization": f"Bearer {key or worker.key}"}) as socket:
        yield socket


def next_event(socket: ClientConnection, timeout: float = 20) -> dict:
    return json.loads(socket.recv(timeout=timeout))


def until(socket: ClientConnection, event: str, job_id: str | None = None) -> list[dict]:
    """Every event up to and including the first `event` (of `job_id`)."""
    seen = []
    while True:
        seen.append(next_event(socket))
        if seen[-1]["event"] == event and (job_id is None or seen[-1]["job_id"] == job_id):
            return seen


def start(api, action, params, *, page, **headers) -> str:
    job_headers = {"X-Result-Ttl": "60"} if "callback" not in headers else {"X-Callback-Url": headers["callback"]}
    response = api.post(f"/{page}/plugin/{action}", json=params, headers=job_headers)
    assert response.status_code == 202, response.text
    return response.json()["job_id"]


def test_one_jobs_events_arrive_in_order(worker, api, receiver):
    with events(worker, "page=ev") as socket:
        job_id = start(api, "testing/count", {"to": 3, "pause_s": 0.15}, page="ev", callback=receiver.url + "/200/ws")
        seen = until(socket, "job.delivered", job_id)
    names = [event["event"] for event in seen]
    job_names = [name for name in names if name.startswith("job.")]
    assert job_names[0] == "job.started" and job_names[-2:] == ["job.ended", "job.delivered"]
    assert set(job_names[1:-2]) == {"job.progress"} and len(job_names) >= 4
    # The page was busy before the job started, and idle again before its end was stored.
    assert names.index("page.busy") < names.index("job.started")
    assert names.index("job.progress") < names.index("page.idle") < names.index("job.ended")
    for event in seen:
        assert event["page_id"] == "ev" and event["job_id"] == job_id
        assert isinstance(event["at"], float)
        if event["event"].startswith("job."):
            assert set(event) == JOB_EVENT_KEYS and event["job"]["job_id"] == job_id
        else:
            assert event["job"] is None
    assert [event["at"] for event in seen] == sorted(event["at"] for event in seen)
    by_name = {event["event"]: event["job"] for event in seen}
    assert by_name["job.started"]["state"] == "running" and by_name["job.started"]["progress"] is None
    assert by_name["job.ended"]["state"] == "done" and by_name["job.ended"]["result"]["counted"] == 3
    assert by_name["job.ended"]["progress"]["done"] == 3
    assert by_name["job.delivered"]["job_id"] == job_id
    progress = [event["job"]["progress"]["done"] for event in seen if event["event"] == "job.progress"]
    assert progress == sorted(progress) and progress[-1] <= 3


def test_a_cancelled_job_ends_in_the_stream_and_a_given_up_webhook_too(worker, api, receiver):
    with events(worker, "page=ev") as socket:
        job_id = start(api, "testing/browser-wait", {"ms": 60_000}, page="ev", callback=receiver.url + "/404/gone")
        until(socket, "job.started", job_id)
        assert api.post(f"/jobs/{job_id}/cancel").status_code == 200
        ended = until(socket, "job.ended", job_id)[-1]
        assert ended["job"]["state"] == "cancelled" and ended["job"]["status"] == 499
        assert until(socket, "job.gave_up", job_id)[-1]["job"]["state"] == "cancelled"


def test_filters_keep_to_their_job_and_page(worker, api):
    with events(worker, "page=other") as other_page:
        ev_job = start(api, "web/state", {}, page="ev")
        other_job = start(api, "web/state", {}, page="other")
        seen = until(other_page, "job.ended", other_job)
    assert {event["page_id"] for event in seen} == {"other"}
    assert ev_job not in {event["job_id"] for event in seen}
    # Page ev's job may still run (only page other's was waited for): it ends first.
    wait_until(lambda: api.get(f"/jobs/{ev_job}").json()["state"] not in ("queued", "running"), what="ev's job to end")
    first = start(api, "testing/sleep", {"seconds": 0.3}, page="ev")
    with events(worker, f"job={first}") as one_job:
        start(api, "web/state", {}, page="other")
        seen = until(one_job, "job.ended", first)
    assert {event["job_id"] for event in seen} == {first}


def test_leases_show_as_page_events(worker, api):
    with events(worker, "page=other") as socket:
        lease = api.post("/other/lease", json={"ttl": 30}).json()["lease"]
        assert next_event(socket)["event"] == "page.leased"
        assert api.request("DELETE", "/other/lease", headers={"X-Lease": lease}).status_code == 200
        assert next_event(socket)["event"] == "page.released"
        api.post("/other/plugin/web/state")  # a plain call: busy, then idle, with no job
        assert [next_event(socket)["event"], next_event(socket)["event"]] == ["page.busy", "page.idle"]


@pytest.mark.parametrize(
    "path, key",
    [
        ("/api/v1/events", "wrong"),
        ("/api/v1/events", ""),
        ("/api/v1/events?job=nope", None),
        ("/api/v1/events?page=Not%20a%20page", None),
        ("/api/v1/nothing-here", None),
    ],
)
def test_a_bad_key_filter_or_path_is_refused_before_accept(worker, path, key):
    headers = {"Authorization": f"Bearer {worker.key if key is None else key}"} if key != "" else {}
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://127.0.0.1:{worker.port}{path}", additional_headers=headers)
    assert refused.value.response.status_code == 403


def test_sockets_past_the_cap_are_refused_and_a_closed_one_frees_its_place(worker, api):
    with events(worker), events(worker), events(worker):  # MAX_EVENT_SOCKETS is 3 here
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url(worker), additional_headers={"Authorization": f"Bearer {worker.key}"})
        assert refused.value.response.status_code == 403
        # Open sockets are not requests in flight: a sleepy worker may still stop.
        assert api.get("/activity").json()["requests_in_flight"] == 0

    def opens() -> bool:
        with events(worker):
            return True

    wait_until(lambda: _refused_or(opens), what="a socket to open again once the others closed")


def _refused_or(opens) -> bool:
    try:
        return opens()
    except InvalidStatus:
        return False


def test_progress_reaches_the_stream_at_most_about_ten_times_a_second(worker, api):
    with events(worker, "page=ev") as socket:
        job_id = start(api, "testing/count", {"to": 200_000, "every": 2000, "pause_s": 0.001}, page="ev")
        seen = until(socket, "job.ended", job_id)
    started = next(event for event in seen if event["event"] == "job.started")
    ended = seen[-1]
    reports = [event for event in seen if event["event"] == "job.progress"]
    assert ended["job"]["progress"]["done"] == 200_000  # the last report is the end's
    assert reports, "no progress reached the stream"
    # 200,000 reports were made; the stream carries one per 0.1 s at most (and one at once).
    assert len(reports) <= (ended["at"] - started["at"]) / 0.1 + 2
    gaps = [later["at"] - earlier["at"] for earlier, later in zip(reports, reports[1:], strict=False)]
    assert all(gap >= 0.09 for gap in gaps)


def test_a_client_that_stops_reading_loses_the_oldest_events_and_is_told(worker, api):
    stuck = RawSocket("127.0.0.1", worker.port, "/api/v1/events?page=ev", worker.key)
    assert stuck.status == 101
    try:
        # 40 jobs with 300 kB results: far more than the connection's buffers hold,
        # so the socket's queue (EVENT_SOCKET_QUEUE, 20 here) fills and overflows.
        jobs = []
        for _ in range(40):
            jobs.append(start(api, "testing/blob", {"size": 300_000}, page="ev"))
            wait_until(lambda: api.get(f"/jobs/{jobs[-1]}").json()["state"] == "done", what="the job to end")
        # The worker went on at full speed meanwhile (the jobs above all ended); now read.
        received, dropped = [], 0
        while not (received and received[-1]["event"] == "job.ended" and received[-1]["job_id"] == jobs[-1]):
            message = stuck.message()
            if message["event"] == "overflow":
                assert set(message) == {"event", "dropped"} and message["dropped"] > 0
                dropped += message["dropped"]
            else:
                received.append(message)
    finally:
        stuck.close()
    assert dropped > 0
    # Every event is either received or counted as dropped: 4 per job (busy, started, idle, ended).
    assert len(received) + dropped == 4 * len(jobs)
    # The newest were kept: the last job's events arrived whole.
    assert [event["event"] for event in received if event["job_id"] == jobs[-1]] == [
        "page.busy", "job.started", "page.idle", "job.ended"
    ]
