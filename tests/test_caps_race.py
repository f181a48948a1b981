"""The caps hold under concurrency: forty requests released together by a
barrier against a real worker (real Chromium, real SQLite), each cap set
low, and the cap held exactly; the rest refused with the cap's own status
and envelope. And a read key leaves the full key its reserved share of the
event sockets and the long-polls (core/caps.py)."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable

import httpx
import pytest
from django.db import connection
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from core.errors import StoreFull
from harness.worker import WorkerProcess, wait_until
from media_store import store
from media_store.models import MediaFile

RACERS = 40
READER = "read-only-key-0123456789abcdefghijklm"


def keyed_client(worker: WorkerProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=worker.base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=90)


class Race:
    """RACERS threads, each with a client of its own connected beforehand,
    that send the moment the last one is ready (a barrier); `answers` fills
    in as they answer, so a test can wait for some while others still wait."""

    def __init__(self, worker: WorkerProcess, send: Callable[[httpx.Client], object], key: str | None = None):
        self.answers: list = [None] * RACERS
        barrier = threading.Barrier(RACERS)

        def racer(index: int) -> None:
            with keyed_client(worker, key or worker.key) as client:
                client.get("/health")  # connected before the barrier: the requests themselves race
                barrier.wait()
                self.answers[index] = send(client)

        self.threads = [threading.Thread(target=racer, args=(index,)) for index in range(RACERS)]
        for thread in self.threads:
            thread.start()

    def answered(self) -> list:
        return [answer for answer in self.answers if answer is not None]

    def finish(self) -> list:
        for thread in self.threads:
            thread.join(120)
        assert all(answer is not None for answer in self.answers), "a racer did not answer"
        return self.answers


def released_together(worker: WorkerProcess, send: Callable[[httpx.Client], object], key: str | None = None) -> list:
    """What each of RACERS requests sent together answered."""
    return Race(worker, send, key).finish()


def sleep_job(client: httpx.Client, seconds: float, **headers: str) -> httpx.Response:
    sent = {"X-Result-Ttl": "60", **{name.replace("_", "-"): value for name, value in headers.items()}}
    return client.post("/main/plugin/testing/sleep", json={"seconds": seconds, "tag": "race"}, headers=sent)


def holding_main(api: httpx.Client) -> str:
    """A job that holds page main until it is cancelled."""
    holder = sleep_job(api, 60)
    assert holder.status_code == 202, holder.text
    return holder.json()["job_id"]


def queued_ids(api: httpx.Client) -> set[str]:
    return {job["job_id"] for job in api.get("/jobs", params={"state": "queued", "limit": 200}).json()["jobs"]}


def statuses(answers: list[httpx.Response]) -> dict[int, int]:
    counted: dict[int, int] = {}
    for answer in answers:
        counted[answer.status_code] = counted.get(answer.status_code, 0) + 1
    return counted


def test_forty_queued_starts_released_together_fill_the_queue_exactly(make_worker):
    worker = make_worker({"QUEUE_MAX": "5"})
    with worker.client() as api:
        holder = holding_main(api)
        answers = released_together(worker, lambda client: sleep_job(client, 0, X_Queue_Timeout="60"))
        assert statuses(answers) == {202: 5, 429: RACERS - 5}
        taken = {answer.json()["job_id"] for answer in answers if answer.status_code == 202}
        assert sorted(api.get(f"/jobs/{job_id}").json()["queue"]["position"] for job_id in taken) == [1, 2, 3, 4, 5]
        for refused in (answer for answer in answers if answer.status_code == 429):
            body = refused.json()
            assert body["success"] is False and body["page_id"] == "main" and "QUEUE_MAX" in body["error"]
            assert int(refused.headers["Retry-After"]) >= 1
        assert queued_ids(api) == taken  # the refused stored nothing
        assert 'penelope_page_queue_depth{page_id="main"} 5.0' in api.get("/metrics").text
        assert api.post(f"/jobs/{holder}/cancel").status_code == 200
        for job_id in taken:
            wait_until(lambda job_id=job_id: api.get(f"/jobs/{job_id}").json()["state"] == "done", what=f"job {job_id} to run")


def test_forty_starts_released_together_hold_no_more_than_max_jobs(make_worker):
    worker = make_worker({"MAX_JOBS": "10", "QUEUE_MAX": "100"})
    with worker.client() as api:
        holding_main(api)
        answers = released_together(worker, lambda client: sleep_job(client, 0, X_Queue_Timeout="60"))
        assert statuses(answers) == {202: 9, 503: RACERS - 9}  # the holder is the tenth
        for refused in (answer for answer in answers if answer.status_code == 503):
            assert refused.json()["success"] is False and "MAX_JOBS" in refused.json()["error"]
        assert api.get("/pressure").json()["jobs_held"] == 10


def test_forty_pages_opened_together_stop_at_max_pages(make_worker):
    worker = make_worker({"MAX_PAGES": "3"})
    names = itertools.count()
    answers = released_together(worker, lambda client: client.post("/pages", json={"page_id": f"p{next(names)}"}))
    assert statuses(answers) == {201: 2, 409: RACERS - 2}  # main is the third
    for refused in (answer for answer in answers if answer.status_code == 409):
        assert refused.json()["success"] is False and "MAX_PAGES" in refused.json()["error"]
    with worker.client() as api:
        opened = {answer.json()["page_id"] for answer in answers if answer.status_code == 201}
        assert {page["page_id"] for page in api.get("/pages").json()["pages"]} == {"main"} | opened


# --- the full key's share: MAX_WAITERS and MAX_EVENT_SOCKETS of 10 keep 1 for it ---------------

SHARED = {"PENELOPE_READ_KEYS": READER, "MAX_WAITERS": "10", "MAX_EVENT_SOCKETS": "10"}
READ_PLACES = 9


def test_forty_read_key_long_polls_leave_the_full_key_its_share(make_worker):
    worker = make_worker(SHARED)
    with worker.client() as api, keyed_client(worker, READER) as reader:
        holder = holding_main(api)
        race = Race(worker, lambda client: client.get(f"/jobs/{holder}", params={"wait": "60"}), key=READER)
        # Every answer before the job ends is a refusal, and one means every
        # place a read key may take is taken: they wait until the job ends.
        wait_until(lambda: len(race.answered()) >= RACERS - 10, what="the long-polls past the cap to be refused")
        assert api.get(f"/jobs/{holder}", params={"wait": "0.1"}).status_code == 200  # the full key's place
        extra = reader.get(f"/jobs/{holder}", params={"wait": "0.1"})
        assert extra.status_code == 503 and "kept for the full key" in extra.json()["error"]
        assert api.post(f"/jobs/{holder}/cancel").status_code == 200
        answers = race.finish()
    assert statuses(answers) == {200: READ_PLACES, 503: RACERS - READ_PLACES}
    for answer in answers:
        body = answer.json()
        if answer.status_code == 200:
            assert body["state"] == "cancelled"  # woken by the end it waited for
        else:
            assert body["success"] is False and "MAX_WAITERS, the last 1 kept for the full key" in body["error"]


def open_socket(worker: WorkerProcess, key: str) -> ClientConnection | InvalidStatus:
    """An event socket, or its handshake's refusal."""
    try:
        return connect(f"ws://127.0.0.1:{worker.port}/api/v1/events", additional_headers={"Authorization": f"Bearer {key}"})
    except InvalidStatus as refused:
        return refused


def test_forty_read_key_event_sockets_leave_the_full_key_its_share(make_worker):
    worker = make_worker(SHARED)
    answers = released_together(worker, lambda _client: open_socket(worker, READER), key=READER)
    with contextlib.ExitStack() as open_sockets:
        sockets = [open_sockets.enter_context(answer) for answer in answers if isinstance(answer, ClientConnection)]
        assert len(sockets) == READ_PLACES
        assert all(refused.response.status_code == 403 for refused in answers if isinstance(refused, InvalidStatus))
        extra = open_socket(worker, READER)
        assert isinstance(extra, InvalidStatus) and extra.response.status_code == 403
        full = open_socket(worker, worker.key)
        assert isinstance(full, ClientConnection)  # the full key's place
        with full:
            pass


def test_a_read_key_makes_no_live_link_so_every_link_is_the_full_keys(make_worker):
    worker = make_worker(SHARED)
    with keyed_client(worker, READER) as reader, worker.client() as api:
        assert reader.post("/main/live", json={}).status_code == 403
        assert api.post("/main/live", json={}).status_code == 201
        document = reader.get("/schema").json()
    # The OpenAPI document says what is kept for the full key, where each cap is described.
    poll = document["paths"]["/api/v1/jobs/{job_id}"]["get"]["responses"]["503"]["description"]
    assert "MAX_WAITERS" in poll and "kept for the full key" in poll
    assert "A read key makes none (403)" in document["paths"]["/api/v1/{page_id}/live"]["post"]["description"]


# --- the media cap, in-process on a real SQLite file: each thread its own connection -----------


@pytest.mark.django_db(transaction=True)
def test_forty_files_stored_together_stop_at_the_media_cap(settings, tmp_path):
    settings.MEDIA_DIR = tmp_path / "media"
    settings.MEDIA_MAX_MB = 0.01  # 10,485 bytes: five files of 2,000
    barrier = threading.Barrier(RACERS)
    outcomes: list = [None] * RACERS

    def racer(index: int) -> None:
        try:
            MediaFile.objects.exists()  # connected before the barrier
            barrier.wait()
            try:
                outcomes[index] = store.put(bytes(2000), content_type="application/octet-stream", filename="f.bin")
            except StoreFull as refused:
                outcomes[index] = refused
        finally:
            connection.close()

    threads = [threading.Thread(target=racer, args=(index,)) for index in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    stored = [outcome for outcome in outcomes if isinstance(outcome, MediaFile)]
    assert len(stored) == 5 and sum(isinstance(outcome, StoreFull) for outcome in outcomes) == RACERS - 5
    assert MediaFile.objects.unclaimed_bytes() == 10_000
    assert sorted(path.name for path in settings.MEDIA_DIR.iterdir()) == sorted(item.path for item in stored)
