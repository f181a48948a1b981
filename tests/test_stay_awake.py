"""The worker's stay-awake signal (`stay_awake` in GET /api/v1/activity, what
KEDA's metrics-api scaler reads on Kubernetes) against a real worker through
a job's whole life: a plain call, a polling job and a webhook job retried
against a failing receiver, with the idle timeout and the webhook schedule
scaled down. Every read is checked against the waker's own stop rule."""

from __future__ import annotations

import math
import threading
import time

import httpx
import pytest

from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from tests.conftest import worker_env
from waker.personas import SLEEPY
from waker.policy import Activity, stop_due

IDLE_TIMEOUT_S = 1.0
# The first webhook attempt at once, the next two after the idle timeout has run out.
ATTEMPTS_S = "0,2,3"
STAY_ENV = {"IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S), "WEBHOOK_ATTEMPTS_S": ATTEMPTS_S, "WEBHOOK_TIMEOUT_S": "0.5"}


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**STAY_ENV)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as running:
        yield running


def read(api: httpx.Client) -> dict:
    """One activity read, checked against the waker's rule: the worker says it
    must stay awake exactly when the waker would not stop it."""
    body = api.get("/activity").json()
    waker_would_stop = stop_due(
        mode=SLEEPY,
        activity=Activity(
            requests_in_flight=body["requests_in_flight"],
            jobs_in_flight=body["jobs_in_flight"],
            webhooks_pending=body["webhooks_pending"],
            idle_seconds=body["idle_seconds"],
            read_at=time.time(),
        ),
        quiet=True,
        running_for=math.inf,
        idle_timeout_s=IDLE_TIMEOUT_S,
        recycle_s=math.inf,
    )
    assert body["stay_awake"] == (0 if waker_would_stop else 1), body
    return body


def asleep(api: httpx.Client) -> dict:
    """Wait for the signal to say the worker may stop, and check why it may."""
    body = wait_until(lambda: (b := read(api))["stay_awake"] == 0 and b, timeout=15, what="stay_awake 0")
    assert body["idle_seconds"] >= IDLE_TIMEOUT_S
    assert (body["requests_in_flight"], body["jobs_in_flight"], body["webhooks_pending"]) == (0, 0, 0)
    return body


def gauge(api: httpx.Client) -> float:
    """`penelope_stay_awake` in GET /api/v1/metrics (a scrape is not client activity)."""
    scraped = api.get("/metrics")
    assert scraped.status_code == 200, scraped.text
    [value] = [line.split()[1] for line in scraped.text.splitlines() if line.startswith("penelope_stay_awake ")]
    return float(value)


def past_the_timeout(body: dict) -> bool:
    """The last client request is older than the idle timeout: only work in
    flight can keep the worker awake now."""
    return body["last_activity_at"] is not None and time.time() - body["last_activity_at"] > IDLE_TIMEOUT_S + 0.1


def test_a_fresh_worker_stays_awake_for_its_idle_timeout_then_may_sleep(worker):
    with worker.client() as api:
        asleep(api)
        # Reading the activity is not client activity: it never wakes the signal.
        assert read(api)["stay_awake"] == 0
        # A client request is: the idle timeout starts again.
        assert api.get("/pages").status_code == 200
        awake = read(api)
        assert awake["stay_awake"] == 1 and awake["idle_seconds"] < IDLE_TIMEOUT_S
        asleep(api)


def test_a_plain_call_keeps_it_awake_past_the_idle_timeout(worker):
    with worker.client() as api, worker.client() as caller:
        asleep(api)
        answered: list[int] = []
        call = threading.Thread(
            target=lambda: answered.append(caller.get("/main/plugin/testing/sleep", params={"seconds": 2.5}).status_code)
        )
        call.start()
        try:
            during = wait_until(
                lambda: (b := read(api))["requests_in_flight"] == 1 and past_the_timeout(b) and b,
                timeout=15,
                what="the call to outlast the idle timeout",
            )
            assert during["stay_awake"] == 1 and during["idle_seconds"] == 0
        finally:
            call.join(30)
        assert answered == [200]
        # The call's end is client activity: the whole timeout again, then sleep.
        assert read(api)["stay_awake"] == 1
        asleep(api)


def test_a_polling_job_keeps_it_awake_while_it_runs(worker):
    with worker.client() as api:
        asleep(api)
        started = api.get("/main/plugin/testing/sleep", params={"seconds": 2.5}, headers={"X-Result-Ttl": "60"})
        assert started.status_code == 202, started.text
        during = wait_until(
            lambda: (b := read(api))["jobs_in_flight"] == 1 and past_the_timeout(b) and b,
            timeout=15,
            what="the job to outlast the idle timeout",
        )
        assert during["stay_awake"] == 1 and during["requests_in_flight"] == 0
        # The metrics say the same, from the same rule.
        assert gauge(api) == 1
        ended = wait_until(lambda: (b := read(api))["jobs_in_flight"] == 0 and b, timeout=15, what="the job's end")
        # The job's end starts the idle clock: awake for the timeout, then not.
        assert ended["stay_awake"] == 1
        asleep(api)
        assert gauge(api) == 0
        # Its result is held, and reading it does not count as a job in flight.
        job = api.get(f"/jobs/{started.json()['job_id']}").json()
        assert (job["state"], job["status"]) == ("done", 200)


def test_a_webhook_job_keeps_it_awake_through_its_retries_until_delivered(worker, receiver):
    path = "/500,500,200/stay-awake"
    with worker.client() as api:
        asleep(api)
        started = api.get(
            "/main/plugin/testing/sleep", params={"seconds": 0}, headers={"X-Callback-Url": receiver.url + path}
        )
        assert started.status_code == 202, started.text
        # The first attempt failed; the next is due after the idle timeout ran out.
        waiting = wait_until(
            lambda: (b := read(api))["webhooks_pending"] == 1 and past_the_timeout(b) and len(receiver.received(path)) == 1 and b,
            timeout=15,
            what="a failed attempt past the idle timeout",
        )
        assert waiting["stay_awake"] == 1 and waiting["jobs_in_flight"] == 0 and waiting["requests_in_flight"] == 0
        wait_until(lambda: len(receiver.received(path)) == 3, timeout=15, what="the third attempt")
        delivered = wait_until(lambda: (b := read(api))["webhooks_pending"] == 0 and b, timeout=15, what="the delivery")
        # The delivery starts the idle clock as a request would.
        assert delivered["stay_awake"] == 1
        asleep(api)
    assert [hit.path for hit in receiver.received(path)] == [path] * 3
