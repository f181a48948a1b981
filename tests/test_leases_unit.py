"""Lease rules on a page, and the broker's line on one page, without a
browser: expiry and renewal, arrival order, timeouts, cancels, job claims."""

from __future__ import annotations

import asyncio
import time

import pytest

from browser.pages import ManagedPage
from core.api import status_of
from core.errors import LeaseRequired, PageBusy
from tests.support.broker_pages import Pages


def page() -> ManagedPage:
    return ManagedPage("main", tab=None)


async def test_a_leased_page_refuses_calls_without_or_with_another_lease():
    broker = Pages("main").broker
    managed = broker.pages["main"]
    lease = broker.take_lease(managed, 60, None)
    for given in (None, "", "someone-else"):
        with pytest.raises(LeaseRequired) as refused:
            managed.check_lease(given)
        assert status_of(refused.value) == 423
    assert managed.check_lease(lease.id) is lease


def test_an_unknown_lease_on_a_free_page_is_refused():
    with pytest.raises(LeaseRequired) as refused:
        page().check_lease("never-issued")
    assert status_of(refused.value) == 423


async def test_a_second_client_cannot_take_a_held_lease_but_the_holder_renews_it():
    broker = Pages("main").broker
    managed = broker.pages["main"]
    lease = broker.take_lease(managed, 60, None)
    with pytest.raises(LeaseRequired):
        broker.take_lease(managed, 60, None)
    assert broker.take_lease(managed, 5, lease.id) is lease
    assert lease.ttl == 5


async def test_a_lease_never_expires_under_a_call_and_restarts_its_ttl_when_the_call_ends():
    broker = Pages("main").broker
    managed = broker.pages["main"]
    lease = broker.take_lease(managed, 0.05, None)
    claim = await broker.acquire("main", wait_s=1, lease_id=lease.id)
    lease.expires_at = time.monotonic() - 10  # its TTL ran out long ago
    assert managed.lease is lease  # a call under it runs
    broker.release(claim)
    assert managed.lease is lease
    assert lease.expires_in(time.monotonic()) > 0.04
    async with asyncio.timeout(5):
        while managed.lease is not None:  # its timer at its end expires it, nobody reading it
            await asyncio.sleep(0.01)


async def test_waiters_are_served_in_arrival_order_and_time_out_with_409():
    broker = Pages("main").broker
    first = await broker.acquire("main", wait_s=1)
    order: list[int] = []

    async def wait_turn(number: int, wait_s: float):
        claim = await broker.acquire("main", wait_s=wait_s)
        order.append(number)
        broker.release(claim)

    waiters = [asyncio.create_task(wait_turn(n, 5)) for n in range(5)]
    late = asyncio.create_task(broker.acquire("main", wait_s=0.05))
    with pytest.raises(PageBusy) as busy:
        await late
    assert status_of(busy.value) == 409 and busy.value.message == "Page main is busy."
    broker.release(first)
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2, 3, 4]


async def test_a_cancelled_waiter_gives_its_turn_up():
    broker = Pages("main").broker
    managed = broker.pages["main"]
    first = await broker.acquire("main", wait_s=1)
    gone = asyncio.create_task(broker.acquire("main", wait_s=5))
    staying = asyncio.create_task(broker.acquire("main", wait_s=5))
    await asyncio.sleep(0)
    assert managed.waiting == 2
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert managed.waiting == 1
    broker.release(first)
    claim = await staying
    assert managed.busy
    broker.release(claim)
    assert not managed.busy


async def test_a_job_claims_only_an_idle_page():
    broker = Pages("main").broker
    claim = await broker.take_now("main", job_id="job1")
    with pytest.raises(PageBusy) as refused:
        await broker.take_now("main", job_id="job2")
    assert status_of(refused.value) == 409
    assert refused.value.message == "Page main already runs job job1."
    broker.release(claim)
    plain = await broker.acquire("main", wait_s=1)
    with pytest.raises(PageBusy) as refused:
        await broker.take_now("main", job_id="job3")
    assert "not idle" in refused.value.message
    broker.release(plain)
