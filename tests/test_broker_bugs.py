"""The bugs that lived where a page is taken, on a real worker: a retry on
`any` that starved beside idle pages, queued jobs on `any` that never
resumed after a restart, and (issue 57) a job queued on `any` left waiting
with room a closed page freed while a later call took it. All take their
pages through the broker now (browser/broker.py)."""

from __future__ import annotations

import threading

import httpx

from harness.worker import WorkerProcess, wait_until
from tests.test_retries import ENV, attempts_made, ended


def test_a_retry_on_any_takes_an_idle_page_at_once(make_worker, tmp_path):
    worker: WorkerProcess = make_worker(env={**ENV, "MAX_PAGES": "2"})
    with worker.client() as api:
        params = {"path": str(tmp_path / "attempts"), "failures": 1, "status": 502}
        started = api.post(
            "/any/plugin/testing/flaky",
            json=params,
            headers={
                "X-Result-Ttl": "60",
                "X-Retry": "1",
                "X-Retry-Backoff": "0.2",
                "X-Queue-Timeout": "30",
            },
        )
        assert started.status_code == 202, started.text
        # Before the broker, the retry waited in the line of `any` beside idle pages until its 30 s ran out.
        body = ended(api, started.json()["job_id"], timeout=20)
        assert (body["state"], body["status"], body["result"]["attempt"]) == ("done", 200, 2), body
        assert attempts_made(tmp_path) == 2


def test_queued_jobs_on_any_resume_after_a_restart(make_worker, tmp_path):
    worker: WorkerProcess = make_worker(env={**ENV, "MAX_PAGES": "2"})
    with worker.client() as api:
        holders = [
            api.post("/any/plugin/testing/sleep", json={"seconds": 600}, headers={"X-Result-Ttl": "60"})
            for _ in range(2)
        ]
        assert [holder.status_code for holder in holders] == [202, 202], [holder.text for holder in holders]
        wait_until(
            lambda: all(api.get(f"/jobs/{h.json()['job_id']}").json()["state"] == "running" for h in holders),
            what="both pages busy",
        )
        queued = [
            api.post(
                "/any/plugin/testing/sleep",
                json={"seconds": 0},
                headers={"X-Result-Ttl": "120", "X-Queue-Timeout": "120"},
            )
            for _ in range(2)
        ]
        assert [job.json()["state"] for job in queued] == ["queued", "queued"], [job.text for job in queued]
    worker.kill()
    worker.start()
    with worker.client() as api:
        # Both pages are idle after the restart: the queued jobs take them (they stayed queued at position 1 before).
        for job in queued:
            body = ended(api, job.json()["job_id"], timeout=30)
            assert (body["state"], body["status"]) == ("done", 200), body


def call_any(worker: WorkerProcess, answers: list[httpx.Response]) -> None:
    """A plain call on `any` (no X-Result-Ttl: it answers when it has run)."""
    with worker.client(timeout=150) as api:
        answers.append(api.post("/any/plugin/testing/sleep", json={"seconds": 0, "tag": "plain"}))


def test_room_a_closed_page_frees_starts_the_job_queued_on_any_before_a_later_call(make_worker, tmp_path):
    worker: WorkerProcess = make_worker(env={"MAX_PAGES": "2", "PAGE_WAIT_S": "120"})
    gates = {name: tmp_path / name for name in ("main", "queued")}
    with worker.client() as api:
        try:
            busy = api.post(
                "/main/plugin/testing/gate", json={"path": str(gates["main"])}, headers={"X-Result-Ttl": "60"}
            )
            assert busy.status_code == 202, busy.text
            wait_until(lambda: api.get(f"/jobs/{busy.json()['job_id']}").json()["state"] == "running", what="main busy")
            assert api.post("/pages", json={"page_id": "p1"}).status_code == 201
            lease = api.post("/p1/lease", json={"ttl": 600}).json()["lease"]  # p1 idle, but leased: not any's
            queued = api.post(
                "/any/plugin/testing/gate",
                json={"path": str(gates["queued"])},
                headers={"X-Result-Ttl": "60", "X-Queue-Timeout": "120"},
            )
            assert (queued.status_code, queued.json()["state"]) == (202, "queued"), queued.text
            job_id = queued.json()["job_id"]
            closed = api.delete("/p1", headers={"X-Lease": lease})  # its lease holder closes it: room frees
            assert closed.status_code == 200, closed.text
            plain: list[httpx.Response] = []  # a plain call on `any` that arrives next, and waits its turn
            call = threading.Thread(target=call_any, args=(worker, plain))
            call.start()

            def first_to_move() -> str | None:
                if plain:
                    return "the plain call answered first"
                return "running" if api.get(f"/jobs/{job_id}").json()["state"] == "running" else None

            # Before the fix the queued job waited on with the room free, and the plain call opened pool-1 for itself.
            assert wait_until(first_to_move, timeout=60, what="the queued job to start") == "running", plain[0].text
            assert api.get("/pool-1").json()["job_id"] == job_id
            gates["queued"].touch()
            call.join(timeout=120)
            assert plain and plain[0].status_code == 200, plain and plain[0].text  # then on the page the job let go
            assert ended(api, job_id)["state"] == "done"
        finally:
            for gate in gates.values():
                gate.touch()
