"""Event ids and catching up (`?since=<id>`) on the event socket, against a
real worker process: a socket that reconnects after a kill -9 and a restart
hears every job's `job.ended` exactly once; one that reconnects inside the
window gets exactly the events it missed, in order, then the live ones; one
whose id is past the window, or was never issued, is told `missed` first."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from harness.worker import WorkerProcess, wait_until
from tests.conftest import worker_env

LIVE = ("queued", "running")


def socket_to(worker: WorkerProcess, query: str = "") -> ClientConnection:
    url = f"ws://127.0.0.1:{worker.port}/api/v1/events" + (f"?{query}" if query else "")
    return connect(url, additional_headers={"Authorization": f"Bearer {worker.key}"})


def read_until(socket: ClientConnection, done, timeout: float = 30) -> list[dict]:
    """Every event the socket sends until `done(seen)` holds."""
    seen: list[dict] = []
    while not done(seen):
        seen.append(json.loads(socket.recv(timeout=timeout)))
    return seen


def ended_of(seen: list[dict], job_id: str) -> bool:
    return any(event["event"] == "job.ended" and event["job_id"] == job_id for event in seen)


def start(api, page: str, action: str, params: dict, **headers: str) -> str:
    response = api.post(f"/{page}/plugin/{action}", json=params, headers={"X-Result-Ttl": "60", **headers})
    assert response.status_code == 202, response.text
    return response.json()["job_id"]


def ended(api, job_id: str) -> dict:
    return wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}").json()) and body["state"] not in LIVE and body,
        what=f"{job_id} to end",
    )


def test_after_a_kill_and_a_restart_a_reconnect_hears_every_retried_jobs_end_once(make_worker, tmp_path):
    worker = make_worker({"MAX_PAGES": "4"})
    retried = []
    with worker.client() as api, socket_to(worker) as socket:
        before = start(api, "main", "web/state", {})
        read_until(socket, lambda seen: ended_of(seen, before))
        for page in ("p1", "p2"):
            assert api.post("/pages", json={"page_id": page}).status_code == 201
        for number, page in enumerate(("main", "p1", "p2")):
            params = {"path": str(tmp_path / f"attempts-{number}"), "failures": 0, "hold_first": True}
            retried.append(start(api, page, "testing/flaky", params, **{"X-Retry": "1", "X-Retry-Backoff": "0.05"}))
        seen = read_until(
            socket, lambda seen: {e["job_id"] for e in seen if e["event"] == "job.started"} >= set(retried)
        )
        wait_until(lambda: all((tmp_path / f"attempts-{n}").exists() for n in range(3)), what="the first attempts")
        last_seen = seen[-1]["id"]
    worker.kill()
    worker.start()
    with worker.client() as api:
        # Their polls are complete before the socket comes back: it was away when they ended.
        assert [ended(api, job_id)["state"] for job_id in retried] == ["done"] * 3
        with socket_to(worker, f"since={last_seen}") as socket:
            caught_up = read_until(socket, lambda seen: all(ended_of(seen, job_id) for job_id in retried))
            after = start(api, "main", "web/state", {})
            caught_up += read_until(socket, lambda seen: ended_of(seen, after))
    ends = Counter(event["job_id"] for event in caught_up if event["event"] == "job.ended")
    assert all(ends[job_id] == 1 for job_id in retried) and ends[after] == 1 and before not in ends
    ids = [event["id"] for event in caught_up]
    assert ids == sorted(set(ids)) and ids[0] > last_seen  # in order, none twice, none seen before
    # The kill -9 is told where it stands: events published just before it may not have been written.
    (crash,) = [event for event in caught_up if event["event"] == "missed"]
    assert crash["detail"]["cause"] == "crash" and crash["detail"]["after_id"] >= 0
    assert all(event["id"] > crash["id"] for event in caught_up if event["job_id"] in retried)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env()).start()
    yield running
    running.stop()


def test_a_reconnect_inside_the_window_gets_exactly_what_it_missed_in_order_then_the_live_events(worker, api):
    with socket_to(worker) as witness:  # connected all along: every event, live
        with socket_to(worker) as away:
            first = start(api, "main", "web/state", {})
            read_until(away, lambda seen: ended_of(seen, first))
            left_at = read_until(witness, lambda seen: ended_of(seen, first))[-1]["id"]
        # While it is away: two jobs end, and a third runs across its return.
        missed = []
        for _ in range(2):
            missed.append(start(api, "main", "web/state", {}))
            ended(api, missed[-1])
        across = start(api, "main", "testing/count", {"to": 8, "pause_s": 0.1})
        with socket_to(worker, f"since={left_at}") as back:
            returned = read_until(back, lambda seen: ended_of(seen, across))
            live = start(api, "main", "web/state", {})
            returned += read_until(back, lambda seen: ended_of(seen, live))
        truth = read_until(witness, lambda seen: ended_of(seen, live))
    assert [event["id"] for event in returned] == [event["id"] for event in truth]
    assert returned == truth  # the same events, whole, in the same order: none twice, none left out at the seam
    assert {event["job_id"] for event in returned if event["event"] == "job.ended"} == {*missed, across, live}


def test_a_malformed_since_is_refused_at_the_handshake(worker):
    for since in ("-1", "1.5", "x", "", "１", "1" * 16):
        with pytest.raises(InvalidStatus) as refused:
            socket_to(worker, f"since={since}").close()
        assert refused.value.response.status_code == 403, since


def test_an_id_this_store_never_issued_is_told_missed_then_live_events(worker, api):
    with socket_to(worker, f"since={10**14}") as socket:
        told = json.loads(socket.recv(timeout=30))
        job_id = start(api, "main", "web/state", {})
        seen = read_until(socket, lambda seen: ended_of(seen, job_id))
    assert told["event"] == "missed" and told["detail"] == {"cause": "unknown", "since": 10**14} and "id" not in told
    assert all(event["id"] < 10**14 for event in seen)


def swept(counted: tuple[int, int | None, int | None], oldest: int, newest: int) -> bool:
    count, first, last = counted
    return count <= 5 and first is not None and first > oldest and last == newest


def test_a_since_older_than_the_window_is_told_missed_first_then_what_is_kept(make_worker):
    worker = make_worker({"EVENT_LOG_KEEP": "5", "SWEEP_S": "0.2"})
    with worker.client() as api, socket_to(worker) as socket:
        first = start(api, "main", "web/state", {})
        oldest = read_until(socket, lambda seen: ended_of(seen, first))[0]["id"]
        later = []
        for _ in range(3):
            later.append(start(api, "main", "web/state", {}))
            ended(api, later[-1])
        seen = read_until(socket, lambda seen: ended_of(seen, later[-1]))
    newest = seen[-1]["id"]
    store = sqlite3.connect(worker.store / "penelope.db")
    try:
        # Every event written (the newest is in), and the sweep past them, down to its bound.
        kept = "select count(*), min(id), max(id) from core_event"
        wait_until(lambda: swept(store.execute(kept).fetchone(), oldest, newest), what="the sweep")
    finally:
        store.close()
    with socket_to(worker, f"since={oldest}") as socket:
        told = json.loads(socket.recv(timeout=30))
        kept = read_until(socket, lambda seen: seen and seen[-1]["id"] == newest)
    assert told["event"] == "missed" and told["detail"] == {"cause": "window", "since": oldest}
    assert 1 <= len(kept) <= 5 and [event["id"] for event in kept] == sorted(event["id"] for event in kept)


def test_an_event_too_large_to_keep_is_replayed_as_missed_with_its_id_and_job(worker, api):
    with socket_to(worker, "page=main") as socket:
        job_id = start(api, "main", "testing/blob", {"size": 100_000})
        live = read_until(socket, lambda seen: ended_of(seen, job_id))
    since = live[0]["id"] - 1
    with socket_to(worker, f"since={since}&job={job_id}") as socket:
        replayed = read_until(socket, lambda seen: seen and seen[-1]["id"] == live[-1]["id"])
    assert [event["id"] for event in replayed] == [event["id"] for event in live if event["job_id"] == job_id]
    assert replayed[:-1] == [event for event in live[:-1] if event["job_id"] == job_id]  # the small ones, whole
    large = replayed[-1]
    assert live[-1]["event"] == "job.ended" and len(live[-1]["job"]["result"]["data"]) == 100_000
    assert large["event"] == "missed" and large["job_id"] == job_id and large["page_id"] == "main"
    assert large["detail"] == {"cause": "large", "event": "job.ended"}


def test_a_deleted_jobs_events_keep_no_copy_of_it(make_worker):
    """USING_JOBS.md: a forgotten (or delivered, or lapsed) job is deleted. The
    log's copy goes with it: a replay shows its events with `"job": null` at
    once, and the next sweep leaves no row in the store that holds it."""
    worker = make_worker({"SWEEP_S": "0.2"})
    with worker.client() as api, socket_to(worker) as socket:
        kept, forgotten = start(api, "main", "testing/blob", {"size": 500}), None
        ended(api, kept)
        forgotten = start(api, "main", "testing/blob", {"size": 700})
        live = read_until(socket, lambda seen: ended_of(seen, forgotten))
        result = ended(api, forgotten)["result"]["data"]
        assert api.delete(f"/jobs/{forgotten}").status_code == 204
        with socket_to(worker, f"since={live[0]['id'] - 1}") as again:
            replayed = read_until(again, lambda seen: seen and seen[-1]["id"] == live[-1]["id"])
    assert [event["id"] for event in replayed] == [event["id"] for event in live]
    for event, was in zip(replayed, live, strict=True):
        if event["job_id"] == forgotten:
            assert event["job"] is None and event == {**was, "job": None}
        else:
            assert event == was  # a job still held is replayed whole
    assert any(event["job_id"] == kept and event["job"] for event in replayed)
    store = sqlite3.connect(worker.store / "penelope.db")
    try:
        holding = "select count(*) from core_event where job_id = ? and text like '%\"job\":{%'"
        wait_until(lambda: store.execute(holding, (forgotten,)).fetchone()[0] == 0, what="the sweep")
        assert store.execute("select count(*) from core_event where instr(text, ?)", (result,)).fetchone()[0] == 0
        assert store.execute(holding, (kept,)).fetchone()[0] > 0
    finally:
        store.close()
