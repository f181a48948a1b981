"""The two bugs that lived where a page is taken, on a real worker: a retry
on `any` that starved beside idle pages, and queued jobs on `any` that never
resumed after a restart. Both take their pages through the broker now
(browser/broker.py)."""

from __future__ import annotations

from harness.worker import WorkerProcess, wait_until
from tests.test_retries import ENV, attempts_made, ended


def test_a_retry_on_any_takes_an_idle_page_at_once(make_worker, tmp_path):
    worker: WorkerProcess = make_worker(env={**ENV, "MAX_PAGES": "2"})
    with worker.client() as api:
        params = {"path": str(tmp_path / "attempts"), "failures": 1, "status": 502}
        started = api.post("/any/plugin/testing/flaky", json=params, headers={
            "X-Result-Ttl": "60", "X-Retry": "1", "X-Retry-Backoff": "0.2", "X-Queue-Timeout": "30",
        })
        assert started.status_code == 202, started.text
        # Before the broker, the retry waited in the line of `any` beside idle pages until its 30 s ran out.
        body = ended(api, started.json()["job_id"], timeout=20)
        assert (body["state"], body["status"], body["result"]["attempt"]) == ("done", 200, 2), body
        assert attempts_made(tmp_path) == 2


def test_queued_jobs_on_any_resume_after_a_restart(make_worker, tmp_path):
    worker: WorkerProcess = make_worker(env={**ENV, "MAX_PAGES": "2"})
    with worker.client() as api:
        holders = [api.post("/any/plugin/testing/sleep", json={"seconds": 600}, headers={"X-Result-Ttl": "60"})
                   for _ in range(2)]
        assert [holder.status_code for holder in holders] == [202, 202], [holder.text for holder in holders]
        wait_until(lambda: all(api.get(f"/jobs/{h.json()['job_id']}").json()["state"] == "running" for h in holders),
                   what="both pages busy")
        queued = [api.post("/any/plugin/testing/sleep", json={"seconds": 0},
                           headers={"X-Result-Ttl": "120", "X-Queue-Timeout": "120"}) for _ in range(2)]
        assert [job.json()["state"] for job in queued] == ["queued", "queued"], [job.text for job in queued]
    worker.kill()
    worker.start()
    with worker.client() as api:
        # Both pages are idle after the restart: the queued jobs take them (they stayed queued at position 1 before).
        for job in queued:
            body = ended(api, job.json()["job_id"], timeout=30)
            assert (body["state"], body["status"]) == ("done", 200), body
