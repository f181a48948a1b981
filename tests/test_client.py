"""The Python client (`client/`, import name `penelope_client`) against a real
worker and a real waker: every method, every error class from a real answer,
a lease kept past its ttl by renewal, a job's long-poll, the job list across
pages, events, both webhook signatures on real deliveries, the waker's
persona client, and `pip install ./client` into a fresh virtual environment.

Durations are scaled down through the worker's settings: one long-poll place
(MAX_WAITERS=1, so a test can see the client hold it), a 0.05 MB media cap, a
20 kB body limit, webhook attempts at 0 and 0.3 s."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.receiver import Receiver
from harness.waker import WakerProcess
from harness.worker import ROOT, WorkerProcess, wait_until
from tests.conftest import TEST_PLUGINS, worker_env

# The client is its own package; CI tests it from the checkout, uninstalled.
CLIENT = ROOT / "client"
sys.path.insert(0, str(CLIENT))

from penelope_client import (  # noqa: E402
    AsyncPenelope,
    AsyncWaker,
    BrowserError,
    Busy,
    InvalidSignature,
    Leased,
    NotFound,
    Penelope,
    PenelopeError,
    QueueFull,
    Refused,
    ServerError,
    StorageFull,
    Timeout,
    TooLarge,
    Unauthorized,
    Unavailable,
    Waker,
    verify_webhook,
)

SECRET_OLD = "whsec_" + base64.b64encode(bytes(range(32))).decode()
SECRET_NEW = "whsec_" + base64.b64encode(bytes(range(100, 132))).decode()
ENV = {
    "MAX_PAGES": "4",
    "MAX_WAITERS": "1",
    "QUEUE_MAX": "1",
    "MAX_BODY_BYTES": "20000",
    "MEDIA_MAX_MB": "0.05",
    "CANCEL_GRACE_S": "1",
    "WEBHOOK_ATTEMPTS_S": "0,0.3",
    "WEBHOOK_TIMEOUT_S": "0.5",
    "WEBHOOK_SECRET": f"{SECRET_OLD} {SECRET_NEW}",  # a rotation: every attempt carries both signatures
}
PERSONA_KEY = "persona-key-0123456789abcdef"


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**ENV)).start()
    yield running
    running.stop()


@pytest.fixture
def client(worker: WorkerProcess) -> Iterator[Penelope]:
    with Penelope(worker.base_url, worker.key, timeout=60) as running:
        yield running


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def waker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WakerProcess]:
    """One sleepy persona that stays up (10 minutes) until a test stops it."""
    running = WakerProcess(
        tmp_path_factory.mktemp("waker"),
        [{"name": "cl", "mode": "sleepy", "idle_timeout_s": 600, "env": {"PENELOPE_KEY": PERSONA_KEY}}],
        env={"PENELOPE_PLUGINS": TEST_PLUGINS, "PAGE_WAIT_S": "2", "MAX_PAGES": "3", "WAKER_POLL_S": "0.2"},
    ).start()
    yield running
    assert running.stop() == [], "workers outlived their waker"


def page_state(client: Penelope, page_id: str = "main") -> dict:
    return next(page for page in client.pages()["pages"] if page["page_id"] == page_id)


class RenewalWatch:
    """Renewals of a page's lease as the worker shows them, from its page
    state polled again and again: each renewal moves the lease's deadline
    (the moment the poll was sent + `lease_expires_in`) later by a third of
    its ttl, which no poll's delay can fake, for a delay only makes the
    deadline seem earlier. Done once the lease was seen renewed `renewals`
    times and still held by a poll sent after the latest moment it could
    have ended without them (taken by `taken_by`, plus its ttl); fails at
    once if the page is seen without its lease."""

    def __init__(self, taken_by: float, ttl: float, renewals: int) -> None:
        self.unrenewed_end = taken_by + ttl
        self.renewals = renewals
        self.deadlines: list[float] = []

    def saw(self, state: dict, sent_at: float) -> bool:
        assert state["leased"], f"the lease ran out after {len(self.deadlines) - 1} renewals"
        deadline = sent_at + state["lease_expires_in"]
        if not self.deadlines or deadline > self.deadlines[-1] + 0.1:
            self.deadlines.append(deadline)
        elif deadline > self.deadlines[-1]:
            self.deadlines[-1] = deadline  # the same deadline, seen with less delay
        return len(self.deadlines) > self.renewals and sent_at > self.unrenewed_end


def renewed_past_its_ttl(client: Penelope, lease, taken_by: float, renewals: int, timeout: float = 30) -> None:
    watch = RenewalWatch(taken_by, lease.ttl, renewals)

    def seen() -> bool:
        sent_at = time.time()
        return watch.saw(page_state(client, lease.page_id), sent_at)

    wait_until(seen, timeout=timeout, interval=0.05, what=f"{renewals} renewals of the lease on {lease.page_id}")


async def renewed_past_its_ttl_async(client: AsyncPenelope, lease, taken_by: float, renewals: int, timeout: float = 30) -> None:
    watch = RenewalWatch(taken_by, lease.ttl, renewals)
    give_up_at = time.monotonic() + timeout
    while True:
        sent_at = time.time()
        state = next(page for page in (await client.pages())["pages"] if page["page_id"] == lease.page_id)
        if watch.saw(state, sent_at):
            return
        assert time.monotonic() < give_up_at, f"timed out after {timeout} s waiting for {renewals} renewals"
        await asyncio.sleep(0.05)  # the poll's pace; the renewer runs on this loop meanwhile


def test_health_pages_and_plain_calls(worker, client):
    assert client.health() == {"success": True, "page_id": None, "status": "ok", "browser": True, "browser_state": "up"}
    # A base URL as pasted from the docs, with /api/v1, and no key: health needs none.
    with Penelope(worker.base_url + "/api/v1/") as keyless:
        assert keyless.health()["status"] == "ok"
    pages = client.pages()
    assert pages["max_pages"] == 4 and [page["page_id"] for page in pages["pages"]] == ["main"]

    opened = client.open_page("cl-calls")
    assert opened["page_id"] == "cl-calls" and opened["busy"] is False and opened["leased"] is False
    try:
        answer = client.call("cl-calls", "demo/open-account", handle="alice")
        assert answer == {
            "success": True,
            "page_id": "cl-calls",
            "handle": "alice",
            "name": "Alice Lopez",
            "followers": 966,
            "following": 896,
        }
        # Parameters named like the call's own arguments reach the plugin.
        assert client.call("cl-calls", "testing/sleep", seconds=0, tag="page")["tag"] == "page"
    finally:
        assert client.close_page("cl-calls") == {"success": True, "page_id": "cl-calls", "closed": True}
    assert [page["page_id"] for page in client.pages()["pages"]] == ["main"]


def test_every_error_class_from_a_real_answer(worker, client):
    def refused(error_class: type[PenelopeError], call, status: int, sentence: str, page_id: str | None = "main"):
        with pytest.raises(error_class) as raised:
            call()
        error = raised.value
        assert (error.status, error.page_id) == (status, page_id)
        assert sentence in error.error, error.error
        return error

    refused(Refused, lambda: client.call("main", "demo/open-account", handle="Not A Handle"), 400, "'handle'")
    refused(TooLarge, lambda: client.call("main", "testing/sleep", seconds=0, tag="x" * 30_000), 413, "larger")
    with Penelope(worker.base_url, "not-the-key") as stranger:
        refused(Unauthorized, stranger.pages, 401, "A valid key is required", page_id=None)
    refused(NotFound, lambda: client.call("main", "web/nope"), 404, "No plugin action web/nope.")
    refused(NotFound, lambda: client.close_page("nope"), 404, "Page nope is not open.", page_id="nope")
    refused(Timeout, lambda: client.call("main", "testing/overrun"), 408, "time limit")
    refused(Busy, lambda: client.close_page("main"), 409, "stays open")
    refused(Busy, lambda: client.open_page("main"), 409, "already open")
    refused(ServerError, lambda: client.call("main", "testing/crash"), 500, "unexpected error")
    refused(
        BrowserError, lambda: client.call("main", "web/open", url="http://127.0.0.1:1/"), 502, "failed in the browser"
    )
    refused(StorageFull, lambda: client.call("main", "testing/media", size=100_000), 507, "MEDIA_MAX_MB")
    # A plugin's own status is a plain PenelopeError.
    assert type(refused(PenelopeError, lambda: client.call("main", "testing/refuse"), 418, "refuses")) is PenelopeError
    # 422: an Idempotency-Key sent again with another request.
    job = client.start_job("main", "testing/sleep", {"seconds": 0}, ttl=30, idempotency_key="cl-422")
    try:
        again = client.start_job("main", "testing/sleep", {"seconds": 0}, ttl=30, idempotency_key="cl-422")
        assert again.id == job.id  # the same request: the same job
        refused(
            Refused,
            lambda: client.start_job("main", "testing/sleep", {"seconds": 1}, ttl=30, idempotency_key="cl-422"),
            422,
            "different request",
        )
    finally:
        job.wait(10)
        job.forget()
    # 423 is in the lease test, 503 in the waker's; refusals the client makes itself:
    with pytest.raises(ValueError, match="not both or neither"):
        client.start_job("main", "web/state")
    with pytest.raises(ValueError, match="not both or neither"):
        client.start_job("main", "web/state", ttl=5, callback="http://127.0.0.1:9/")


def test_a_lease_is_renewed_past_its_ttl_carried_by_its_calls_and_released(client):
    with client.lease("main", ttl=1) as lease:
        taken_by = time.time()
        assert len(lease.id) == 32
        # Held past the deadline it was taken with, four renewals later: alive
        # only because the client renewed it.
        renewed_past_its_ttl(client, lease, taken_by, renewals=4)
        assert lease.lost is None
        assert lease.call("web/state")["page_id"] == "main"
        held = page_state(client)
        assert held["leased"] is True and held["lease_expires_in"] <= 1
        with pytest.raises(Leased) as raised:
            client.call("main", "web/state")  # without the lease
        assert raised.value.page_id == "main" and "X-Lease" in raised.value.error
        job = lease.start_job("testing/sleep", {"seconds": 0, "tag": "leased"}, ttl=30)
        assert job.wait(10)["result"]["tag"] == "leased"
        job.forget()
        assert lease.renew(ttl=5)["ttl"] == 5.0
    assert page_state(client)["leased"] is False
    assert client.call("main", "web/state")["success"] is True
    with pytest.raises(Leased, match="unknown or expired"):  # the released lease is refused from now on
        lease.call("web/state")

    # Released on an error too.
    with pytest.raises(RuntimeError, match="inside the block"):
        with client.lease("main", ttl=30):
            assert page_state(client)["leased"] is True
            raise RuntimeError("inside the block")
    assert page_state(client)["leased"] is False


@pytest.mark.serial  # a long-poll answered under 0.5 s after the end: a time bound (pytest.ini)
def test_a_job_waits_by_long_poll_and_is_cancelled_and_forgotten(worker, client):
    job = client.start_job("main", "testing/sleep", {"seconds": 1.5, "tag": "waited"}, ttl=30)
    assert job.started["job_id"] == job.id and job.started["ttl"] == 30.0 and job.started["callback"] is None
    assert job.poll()["state"] == "running"
    with pytest.raises(Busy, match="still running"):
        job.forget()

    waited: list[tuple[dict, float]] = []
    waiter = threading.Thread(target=lambda: waited.append((job.wait(20), time.time())))
    waiter.start()
    # The worker's one long-poll place (MAX_WAITERS=1) is held by wait(): a long-poll of our own is refused.
    with worker.client() as direct:
        wait_until(
            lambda: direct.get("/activity").json()["requests_in_flight"] == 1,
            timeout=5,
            what="the client's long-poll to be in flight",
        )
        assert direct.get(f"/jobs/{job.id}", params={"wait": "0.05"}).status_code == 503
    # A second wait() beside it finds no place either, and polls instead.
    assert client.job(job.id).wait(20)["state"] == "done"
    waiter.join(20)
    ended, returned_at = waited[0]
    assert ended["state"] == "done" and ended["status"] == 200 and ended["result"]["tag"] == "waited"
    assert returned_at - ended["finished_at"] < 0.5  # answered as the job ended, not at a later poll
    job.forget()
    with pytest.raises(NotFound, match="No such job"):
        job.poll()
    with pytest.raises(NotFound):
        job.forget()

    # A wait whose timeout passes answers the job as it runs; then a cancel.
    long = client.start_job("main", "testing/sleep", {"seconds": 30}, ttl=30)
    started = time.monotonic()
    assert long.wait(0.4)["state"] == "running"
    assert 0.35 < time.monotonic() - started < 3
    cancelled = long.cancel()
    assert (cancelled["state"], cancelled["status"]) == ("cancelled", 499)
    assert cancelled["result"] == {"success": False, "error": "job cancelled by a client", "page_id": "main"}
    assert long.wait()["state"] == "cancelled"
    with pytest.raises(Busy, match="already ended"):
        long.cancel()
    long.forget()


def test_a_job_waits_for_a_busy_page_and_a_full_queue_says_when_to_retry(client):
    holder = client.start_job("main", "testing/sleep", {"seconds": 30, "tag": "holder"}, ttl=30)
    queued = client.start_job(
        "main", "testing/sleep", {"seconds": 0, "tag": "queued"}, ttl=30, queue_timeout=30, priority=3
    )
    assert queued.started["state"] == "queued" and queued.started["queue"]["position"] == 1
    with pytest.raises(QueueFull) as full:
        client.start_job("main", "testing/sleep", {"seconds": 0}, ttl=30, queue_timeout=30)
    assert full.value.status == 429 and full.value.retry_after >= 1
    pressure = client.pressure()
    assert (pressure["running"], pressure["queued"]) == (1, 1)
    holder.cancel()
    done = queued.wait(timeout=30)
    assert done["state"] == "done" and done["result"]["tag"] == "queued"


def test_the_job_list_is_iterated_across_pages_of_results(client):
    client.open_page("cl-list")
    try:
        started = []
        for n in range(5):
            job = client.start_job("cl-list", "testing/sleep", {"seconds": 0, "tag": str(n)}, ttl=30)
            job.wait(10)
            started.append(job.id)
        listed = list(client.jobs(page_id="cl-list", limit=2))  # three answers: 2, 2 and 1
        assert [job["job_id"] for job in listed] == started[::-1]
        assert all(job["state"] == "done" and "result" not in job for job in listed)
        assert len(list(client.jobs(page_id="cl-list", plugin="testing/sleep", state="done", limit=1))) == 5
        assert list(client.jobs(page_id="cl-list", state="running")) == []
        with pytest.raises(Refused, match="state"):
            list(client.jobs(state="sleeping"))
        for job_id in started:
            client.job(job_id).forget()
    finally:
        client.close_page("cl-list")


def test_events_of_a_page_and_of_one_job(worker, client):
    with client.events(page="main") as events:
        job = client.start_job("main", "testing/sleep", {"seconds": 0.2}, ttl=30)
        seen: list[str] = []
        while "job.ended" not in seen:
            event = events.receive(timeout=10)
            if event.get("job_id") == job.id:
                seen.append(event["event"])
    job_events = [name for name in seen if name.startswith("job.")]
    assert job_events[0] == "job.started" and job_events[-1] == "job.ended"
    assert {"page.busy", "page.idle"} <= set(seen)  # the page events the job caused

    job = client.start_job("main", "testing/sleep", {"seconds": 1}, ttl=30)
    with client.events(job=job.id) as events:
        ended = next(event for event in events if event["event"] == "job.ended")
    assert ended["job_id"] == job.id and ended["job"]["state"] == "done" and ended["job"]["result"]["success"]
    job.forget()

    with pytest.raises(PenelopeError) as raised:
        Penelope(worker.base_url, "not-the-key").events().open()
    assert raised.value.status == 403 and "refused the event socket" in raised.value.error
    with client.events(job="0123456789abcdef") as quiet, pytest.raises(TimeoutError):
        quiet.receive(timeout=0.2)


def test_events_since_an_id_catch_up_on_what_happened_meanwhile(client):
    with client.events(page="main") as events:
        first = client.start_job("main", "testing/sleep", {"seconds": 0}, ttl=30)
        last_seen = next(e for e in events if e["event"] == "job.ended" and e["job_id"] == first.id)["id"]
    meanwhile = client.start_job("main", "testing/sleep", {"seconds": 0}, ttl=30)
    meanwhile.wait(timeout=30)
    with client.events(page="main", since=last_seen) as events:
        ended = next(event for event in events if event["event"] == "job.ended")
    assert ended["job_id"] == meanwhile.id and ended["id"] > last_seen
    first.forget()
    meanwhile.forget()


def by_hand(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """A Standard Webhooks signature, from the specification."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    return (
        "v1,"
        + base64.b64encode(hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()).decode()
    )


def test_verify_webhook_checks_both_schemes_on_a_real_delivery(worker, client, receiver):
    job = client.start_job("main", "web/state", callback=receiver.url + "/200/client")
    assert job.started["callback"] == receiver.url + "/200/client" and job.started["ttl"] is None
    delivery = wait_until(lambda: receiver.received("/200/client"), what="the webhook")[0]
    body, headers = delivery.body, delivery.headers
    expected = json.loads(body)
    assert expected["job_id"] == job.id and expected["state"] == "done"

    assert verify_webhook(body, headers, key=worker.key) == expected
    for secret in (SECRET_NEW, SECRET_OLD, f"{SECRET_OLD} {SECRET_NEW}", [SECRET_NEW]):
        assert verify_webhook(body, headers, secret=secret) == expected
    assert verify_webhook(body.decode(), {k.upper(): v for k, v in headers.items()}, key=worker.key, secret=SECRET_NEW)

    tampered = body.replace(b'"state":"done"', b'"state":"DONE"')
    assert tampered != body
    other_secret = "whsec_" + base64.b64encode(bytes(32)).decode()
    for refused in (
        lambda: verify_webhook(tampered, headers, key=worker.key),
        lambda: verify_webhook(tampered, headers, secret=SECRET_NEW),
        lambda: verify_webhook(body, headers, key="not-the-key"),
        lambda: verify_webhook(body, headers, secret=other_secret),
        lambda: verify_webhook(body, headers, key=worker.key, secret=other_secret),  # both given: both must hold
        lambda: verify_webhook(body, {"X-Penelope-Signature": headers["X-Penelope-Signature"]}, secret=SECRET_NEW),
    ):
        with pytest.raises(InvalidSignature):
            refused()
    with pytest.raises(TypeError):
        verify_webhook(body, headers)

    # The timestamp is signed; a delivery dated more than 5 minutes off is a replay.
    def dated(seconds_ago: int) -> dict[str, str]:
        timestamp = str(int(time.time()) - seconds_ago)
        return {
            **headers,
            "webhook-timestamp": timestamp,
            "webhook-signature": by_hand(SECRET_NEW, headers["webhook-id"], timestamp, body),
        }

    assert verify_webhook(body, dated(200), secret=SECRET_NEW) == expected
    with pytest.raises(InvalidSignature, match="off"):
        verify_webhook(body, dated(310), secret=SECRET_NEW)
    with pytest.raises(InvalidSignature, match="off"):
        verify_webhook(body, dated(-310), secret=SECRET_NEW)
    with pytest.raises(InvalidSignature):  # the old signature no longer matches the new date
        verify_webhook(body, {**headers, "webhook-timestamp": str(int(time.time()) - 5)}, secret=SECRET_NEW)


def test_retries_reruns_and_schedules(client, tmp_path):
    flaky = {"path": str(tmp_path / "attempts"), "failures": 1, "status": 503}
    job = client.start_job("main", "testing/flaky", flaky, ttl=30, retry=2, retry_backoff=0.05)
    ended = job.wait(20)
    assert ended["state"] == "done" and ended["attempt"] == 2
    assert [attempt["status"] for attempt in ended["attempts"]] == [503, 200]
    again = job.rerun()
    assert again.id != job.id and again.started["rerun_of"] == job.id
    assert again.wait(20)["result"]["attempt"] == 3  # the same parameters: the plugin's count goes on
    with pytest.raises(Refused):  # 400: X-Retry past 10, and nothing started
        client.start_job("main", "testing/sleep", {"seconds": 0}, ttl=30, retry=11)
    for each in (job, again):
        each.forget()

    made = client.create_schedule(
        "cl-nightly", cron="0 3 * * *", timezone="Europe/Paris", plugin="testing/sleep",
        params={"seconds": 0, "tag": "nightly"}, result_ttl=60,
    )
    schedule_id = made["schedule_id"]
    try:
        assert made["next_fire_at"] > time.time() and client.schedule(schedule_id)["name"] == "cl-nightly"
        assert schedule_id in [each["schedule_id"] for each in client.schedules()]
        assert client.update_schedule(schedule_id, paused=True)["paused"] is True
        fired = client.trigger_schedule(schedule_id)  # paused or not
        assert fired.wait(20)["schedule_id"] == schedule_id
        assert [listed["job_id"] for listed in client.jobs(schedule=schedule_id)] == [fired.id]
        with pytest.raises(Refused):
            client.update_schedule(schedule_id, cron="61 * * * *")
    finally:
        client.delete_schedule(schedule_id)
    with pytest.raises(NotFound):
        client.schedule(schedule_id)


async def test_the_async_twin(worker):
    async with AsyncPenelope(worker.base_url, worker.key, timeout=60) as client:
        assert (await client.health())["browser"] is True
        assert (await client.open_page("cl-async"))["page_id"] == "cl-async"
        try:
            assert "cl-async" in [page["page_id"] for page in (await client.pages())["pages"]]
            assert (await client.call("cl-async", "testing/sleep", seconds=0, tag="a"))["tag"] == "a"
            with pytest.raises(NotFound):
                await client.call("cl-async", "web/nope")

            async with client.lease("cl-async", ttl=0.6) as lease:
                await renewed_past_its_ttl_async(client, lease, time.time(), renewals=4)
                assert lease.lost is None and (await lease.call("web/state"))["success"]
                with pytest.raises(Leased):
                    await client.call("cl-async", "web/state")
                job = await lease.start_job("testing/sleep", {"seconds": 0.5}, ttl=30)
            assert (await job.wait(10))["state"] == "done"
            await job.forget()
            await client.call("cl-async", "web/state")  # released

            job = await client.start_job("cl-async", "testing/sleep", {"seconds": 1}, ttl=30)
            async with client.events(job=job.id) as events:
                async for event in events:
                    if event["event"] == "job.ended":
                        break
                with pytest.raises(TimeoutError):  # nothing more for this job
                    await events.receive(timeout=0.2)
            assert event["job"]["state"] == "done"
            await job.forget()

            first = await client.start_job("cl-async", "testing/sleep", {"seconds": 0}, ttl=30)
            await first.wait(10)
            second = await client.start_job("cl-async", "testing/sleep", {"seconds": 0}, ttl=30)
            await second.wait(10)
            listed = [job["job_id"] async for job in client.jobs(page_id="cl-async", limit=1)]
            assert listed == [second.id, first.id]  # two answers of one job each
            for each in (first, second):
                await each.forget()

            running = await client.start_job("cl-async", "testing/sleep", {"seconds": 30}, ttl=30)
            assert (await running.poll())["state"] == "running"
            assert (await running.wait(0.3))["state"] == "running"
            assert (await running.cancel())["state"] == "cancelled"
            await running.forget()
            with pytest.raises(NotFound):
                await client.job(running.id).poll()

            retried = await client.start_job("cl-async", "testing/sleep", {"seconds": 0}, ttl=30, retry=1)
            assert (await retried.wait(10))["attempts"][0]["status"] == 200
            again = await retried.rerun()
            assert again.started["rerun_of"] == retried.id and (await again.wait(10))["rerun_of"] == retried.id
            made = await client.create_schedule(
                "cl-async", cron="0 3 * * *", page_id="cl-async", plugin="testing/sleep", params={"seconds": 0},
                result_ttl=30,
            )
            fired = await client.trigger_schedule(made["schedule_id"])
            assert (await fired.wait(10))["schedule_id"] == made["schedule_id"]
            assert (await client.update_schedule(made["schedule_id"], paused=True))["paused"] is True
            assert [each["name"] for each in await client.schedules()].count("cl-async") == 1
            await client.delete_schedule(made["schedule_id"])
            with pytest.raises(NotFound):
                await client.schedule(made["schedule_id"])
        finally:
            assert (await client.close_page("cl-async"))["closed"] is True


def test_the_waker_and_a_persona_client_sync_and_async(waker):
    with Waker(waker.base_url, waker.key) as wake, wake.persona("cl", PERSONA_KEY) as persona:
        assert wake.health()["personas"] == 1
        (listed,) = wake.personas()["personas"]
        assert (listed["name"], listed["state"]) == ("cl", "stopped")
        # health needs no key, so it does not wake the worker: 503 while it sleeps.
        with pytest.raises(Unavailable, match="stopped") as raised:
            persona.health()
        assert raised.value.status == 503 and raised.value.page_id is None

        # A call with the persona's key wakes it.
        assert persona.call("main", "web/state")["page_id"] == "main"
        assert wake.start("cl")["state"] == "running"  # already running: left as it is
        job = persona.start_job("main", "testing/sleep", {"seconds": 1}, ttl=30)
        with pytest.raises(Busy, match="work in flight"):
            wake.stop("cl")
        assert job.wait(10)["state"] == "done"  # polled through the waker
        assert [each["job_id"] for each in persona.jobs()] == [job.id]
        job.forget()
        with persona.events(page="main") as events:  # carried by the waker
            persona.call("main", "testing/sleep", seconds=0)
            assert next(event for event in events if event["event"] == "page.busy")["page_id"] == "main"
        link = persona.live_link("main")
        assert link["url"].startswith(f"{waker.base_url}/w/cl/live/")
        assert httpx.get(link["url"]).status_code == 200  # through the waker, without a key
        assert persona.revoke_live_links("main") == 1

        asyncio.run(the_async_waker(waker))  # on the same running worker: no second start

        assert wake.stop("cl", force=True)["state"] == "stopped"
        with Waker(waker.base_url, "not-the-key") as stranger, pytest.raises(Unauthorized):
            stranger.personas()
        with wake.persona("cl", "not-the-key") as intruder, pytest.raises(Unauthorized):
            intruder.pages()  # refused by the waker before it wakes anything
        with wake.persona("ghost", PERSONA_KEY) as ghost, pytest.raises(NotFound, match="No persona ghost"):
            ghost.pages()
        assert wake.personas()["personas"][0]["state"] == "stopped"


async def the_async_waker(waker: WakerProcess) -> None:
    async with AsyncWaker(waker.base_url, waker.key) as wake, wake.persona("cl", PERSONA_KEY) as persona:
        assert (await wake.health())["status"] == "ok"
        assert (await wake.start("cl"))["state"] == "running"
        assert [each["state"] for each in (await wake.personas())["personas"]] == ["running"]
        assert (await persona.health())["browser"] is True
        job = await persona.start_job("main", "testing/sleep", {"seconds": 0.5}, ttl=30)
        with pytest.raises(Busy, match="work in flight"):
            await wake.stop("cl")
        assert (await job.wait(10))["result"]["success"] is True
        await job.forget()
        async with persona.events(page="main") as events:
            await persona.call("main", "testing/sleep", seconds=0)
            assert (await events.receive(timeout=10))["event"] == "page.busy"
        assert (await persona.live_link("main"))["url"].startswith(f"{waker.base_url}/w/cl/live/")
        assert await persona.revoke_live_links("main") == 1


def test_pip_install_into_a_fresh_venv_and_one_real_call(worker, tmp_path):
    """`pip install ./client[events]` as a user runs it (build isolation, its
    dependencies from the package index), from a copy of the checkout's
    client, which the install leaves as it was (no build/, no *.egg-info)."""
    source = tmp_path / "client"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    files_before = sorted(path.relative_to(source) for path in source.rglob("*"))
    venv = tmp_path / "venv"
    # Without a pip of its own (quicker to make): this pip installs into it.
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"no virtual environment can be made here: {made.stderr.strip()[-300:]}")
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", f"{source}[events]"],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert sorted(path.relative_to(source) for path in source.rglob("*")) == files_before
    script = (
        "import json, pathlib, penelope_client, websockets\n"
        "from penelope_client import Penelope\n"
        f"with Penelope({worker.base_url!r}, {worker.key!r}) as client:\n"
        "    answer = client.call('main', 'web/state')\n"
        "here = pathlib.Path(penelope_client.__file__).parent\n"
        "print(json.dumps({'answer': answer, 'from': str(here), 'typed': (here / 'py.typed').exists()}))\n"
    )
    ran = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["answer"]["success"] is True and result["answer"]["page_id"] == "main"
    assert Path(result["from"]).is_relative_to(venv) and result["typed"] is True
