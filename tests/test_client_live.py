"""The Python client for a person in the loop, against a real worker and a
real receiver: live links made, used and revoked; a job's `human`; the
`job.needs_human` notification checked with the client's own function."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from standardwebhooks import Webhook

from harness.receiver import Receiver
from harness.worker import ROOT, wait_until

sys.path.insert(0, str(ROOT / "client"))

from penelope_client import (  # noqa: E402
    AsyncPenelope,
    Busy,
    InvalidSignature,
    Leased,
    NotFound,
    Penelope,
    QueueFull,
    Refused,
    verify_notification,
    verify_webhook,
)


@pytest.fixture
def client(worker) -> Iterator[Penelope]:
    with Penelope(worker.base_url, worker.key, timeout=60) as penelope:
        yield penelope


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def test_live_links_are_made_absolute_used_and_revoked(worker, client):
    link = client.live_link("main", ttl=120, control=True)
    assert link["url"].startswith(f"{worker.base_url}/live/") and link["control"] is True and link["page_id"] == "main"
    assert 110 < link["expires_at"] - time.time() <= 120  # the ttl sent, not the default 900
    assert httpx.get(link["url"]).status_code == 200
    assert client.live_link("main")["control"] is False
    assert client.revoke_live_links("main") == 2
    assert httpx.get(link["url"]).status_code == 404
    with pytest.raises(NotFound):
        client.live_link("nowhere")
    with pytest.raises(Refused) as refused:
        client.live_link("main", ttl=0)
    assert refused.value.status == 400
    with client.lease("main", ttl=30) as lease:
        with pytest.raises(Leased):
            client.live_link("main", control=True)
        assert client.live_link("main", control=True, lease=lease.id)["control"] is True
        assert lease.live_link(control=True)["control"] is True  # the Lease sends its X-Lease
    assert client.revoke_live_links("main") == 2


def test_a_page_full_of_links_and_a_plain_call_that_asks(client):
    urls = {client.live_link("main", ttl=60)["url"] for _ in range(64)}  # MAX_LINKS_PER_PAGE
    assert len(urls) == 64
    with pytest.raises(QueueFull) as full:
        client.live_link("main")
    assert full.value.status == 429 and full.value.retry_after is None and "revoke" in full.value.error
    assert client.revoke_live_links("main") == 64
    with pytest.raises(Busy, match="start it as a job"):  # only a job can ask a person
        client.call("main", "testing/ask", reason="Anyone?")


def test_a_job_shows_its_question_and_the_notification_checks_out(worker, client, receiver):
    job = client.start_job(
        "main", "testing/ask", {"reason": "Press Done."}, ttl=30, notify_url=receiver.url + "/200/client-asked"
    )
    human = wait_until(job.human, what="the question")
    assert human["reason"] == "Press Done." and human["live_url"].startswith(f"{worker.base_url}/live/")
    assert httpx.get(human["live_url"]).status_code == 200
    note = wait_until(lambda: receiver.received("/200/client-asked"), what="the notification")[0]
    secret = (worker.store / "webhook_secret").read_text().strip()
    shown = verify_notification(note.body, note.headers, key=worker.key, secret=secret)
    assert shown["job_id"] == job.id and shown["human"]["reason"] == "Press Done."
    with pytest.raises(InvalidSignature, match="not a job's end"):  # a job-end receiver cannot take it for one
        verify_webhook(note.body, note.headers, secret=secret)
    with pytest.raises(InvalidSignature):
        verify_notification(note.body.replace(b"Press Done", b"Press Dane"), note.headers, secret=secret)
    other = json.dumps({"type": "job.ended", "data": shown}).encode()
    now = datetime.now(tz=UTC)
    signed = {"webhook-id": "x", "webhook-timestamp": str(int(now.timestamp())),
              "webhook-signature": Webhook(secret).sign("x", now, other.decode())}
    with pytest.raises(InvalidSignature, match="no job.needs_human"):  # signed, but another kind of message
        verify_notification(other, signed, secret=secret)
    assert job.cancel()["state"] == "cancelled"
    assert job.human() is None


def test_the_async_twin_makes_links_and_reads_the_question(worker):
    async def play() -> None:
        async with AsyncPenelope(worker.base_url, worker.key, timeout=60) as client:
            link = await client.live_link("main", ttl=60)
            assert link["url"].startswith(f"{worker.base_url}/live/")
            assert await client.revoke_live_links("main") == 1
            async with client.lease("main", ttl=30) as lease:
                assert (await lease.live_link(control=True, ttl=30))["control"] is True
            assert await client.revoke_live_links("main") == 1
            job = await client.start_job("main", "testing/ask", {"wait_s": 0.5}, ttl=30)
            assert (await job.wait(30))["result"]["answer"] == "timeout"
            assert await job.human() is None
            job = await client.start_job("main", "testing/ask", {}, ttl=30)
            while (human := await job.human()) is None:
                await asyncio.sleep(0.05)
            assert human["live_url"].startswith(f"{worker.base_url}/live/")
            await job.cancel()

    asyncio.run(play())
