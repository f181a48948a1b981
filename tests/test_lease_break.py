"""An operator breaks a lease whose id was lost: `DELETE /{page_id}/lease?force=true`,
against a real worker; and the page rule underneath, without a browser."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from websockets.sync.client import connect

from harness.worker import WorkerProcess, wait_until
from tests.support.broker_pages import Pages

BROKEN_LINE = re.compile(r"WARNING penelope\.pages: page main: lease broken by force, (\d+\.\d) s after it was taken")


def envelope(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"success", "error", "page_id"} and body["success"] is False and body["page_id"] == "main"
    return body["error"]


def page_state(api: httpx.Client) -> dict:
    return api.get("/main").json()


@pytest.fixture
def lease(api) -> str:
    """A lease on main, broken at the end if the test left it."""
    taken = api.post("/main/lease", json={"ttl": 60})
    assert taken.status_code == 201, taken.text
    yield taken.json()["lease"]
    if page_state(api)["leased"]:
        api.delete("/main/lease", params={"force": "true"})


def test_a_lease_is_broken_without_its_id_and_an_unleased_call_then_runs(worker: WorkerProcess, api, lease):
    envelope(api.post("/main/plugin/web/state"), 423)
    with connect(
        f"ws://127.0.0.1:{worker.port}/api/v1/events?page=main", additional_headers={"Authorization": f"Bearer {worker.key}"}
    ) as events:
        broken = api.delete("/main/lease", params={"force": "true"})
        assert broken.status_code == 200, broken.text
        assert json.loads(events.recv(timeout=10))["event"] == "page.released"
    body = broken.json()
    assert set(body) == {"success", "page_id", "released", "forced", "lease_age_s"}
    assert body["success"] is True and body["page_id"] == "main" and body["released"] is True and body["forced"] is True
    assert isinstance(body["lease_age_s"], float) and 0 <= body["lease_age_s"] < 60
    assert body["lease_age_s"] == round(body["lease_age_s"], 1)
    assert page_state(api)["leased"] is False
    assert api.post("/main/plugin/web/state").status_code == 200
    assert "unknown or expired" in envelope(api.post("/main/plugin/web/state", headers={"X-Lease": lease}), 423)


def test_force_ignores_a_wrong_lease_id_and_takes_1(api, lease):
    broken = api.delete("/main/lease", params={"force": "1"}, headers={"X-Lease": "not-the-lease"})
    assert broken.status_code == 200 and broken.json()["forced"] is True
    assert page_state(api)["leased"] is False


@pytest.mark.parametrize("value", ["maybe", "TRUE", "True", "yes", "2", ""])
def test_a_bad_force_value_answers_400_and_the_lease_is_still_held(api, lease, value):
    assert "force is true or false" in envelope(api.delete("/main/lease", params={"force": value}), 400)
    assert page_state(api)["leased"] is True
    assert api.post("/main/plugin/web/state", headers={"X-Lease": lease}).status_code == 200


def test_without_force_the_release_answers_as_before(api, lease):
    assert "send its lease" in envelope(api.delete("/main/lease"), 423)
    assert "send its lease" in envelope(api.delete("/main/lease", params={"force": "false"}), 423)
    envelope(api.delete("/main/lease", params={"force": "0"}, headers={"X-Lease": "wrong"}), 423)
    assert page_state(api)["leased"] is True
    released = api.delete("/main/lease", params={"force": "false"}, headers={"X-Lease": lease})
    assert released.status_code == 200 and released.json() == {"success": True, "page_id": "main", "released": True}


def test_a_page_without_a_lease_answers_423_as_a_release_does(api):
    assert page_state(api)["leased"] is False
    forced = envelope(api.delete("/main/lease", params={"force": "true"}), 423)
    assert forced == envelope(api.delete("/main/lease", headers={"X-Lease": "x"}), 423)
    assert forced == "Page main has no lease to release."


def test_a_job_under_a_broken_lease_runs_to_its_end_and_the_page_is_free_after(worker: WorkerProcess, api, lease):
    started = api.post(
        "/main/plugin/testing/sleep",
        json={"seconds": 1.5, "tag": "under-lease"},
        headers={"X-Lease": lease, "X-Result-Ttl": "60"},
    )
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    state = page_state(api)
    assert state["busy"] and state["job_id"] == job_id and state["leased"]

    broken = api.delete("/main/lease", params={"force": "true"})
    broken_at = time.time()
    assert broken.status_code == 200 and broken.json()["forced"] is True
    state = page_state(api)
    assert state["job_id"] == job_id and state["busy"] and state["leased"] is False

    job = wait_until(
        lambda: (poll := api.get(f"/jobs/{job_id}", params={"wait": 30}).json())["state"] != "running" and poll,
        timeout=30, what="the job to end",
    )
    assert job["state"] == "done" and job["status"] == 200, job
    assert job["result"]["tag"] == "under-lease"
    assert job["result"]["started"] <= broken_at <= job["result"]["ended"]  # broken mid-run
    state = page_state(api)
    assert not state["busy"] and state["job_id"] is None and state["leased"] is False  # not resurrected
    assert api.post("/main/plugin/web/state").status_code == 200

    line = wait_until(lambda: BROKEN_LINE.search(worker.log()), timeout=10, what="the break's WARNING line")
    assert 0 <= float(line.group(1)) < 60
    assert f"1 call(s) under it run on, job {job_id}" in worker.log()


async def test_a_call_under_a_broken_lease_ends_without_bringing_it_back():
    broker = Pages("main").broker
    page = broker.pages["main"]
    lease = broker.take_lease(page, 60, None)
    claim = await broker.acquire("main", wait_s=1, lease_id=lease.id)
    assert broker.release_lease(page, None, force=True) is lease
    assert page.lease is None and lease.active_calls == 1
    broker.release(claim)
    assert page.lease is None and not page.busy
    assert page.check_lease(None) is None
    unleased = await broker.acquire("main", wait_s=1)
    assert unleased.lease is None
    broker.release(unleased)
