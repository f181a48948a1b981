"""The page broker's rules one at a time, in-process (browser/broker.py):
who goes first, what `any` takes, leases, and a page closed under its
waiters. tests/test_broker_registry_property.py drives them at random,
with the real registry."""

from __future__ import annotations

import asyncio

import pytest
from django.test import override_settings

from browser.pages import ManagedPage
from core.errors import BrowserNotRunning, PageNotOpen
from core.routes import ANY
from tests.support.broker_pages import Pages


async def test_priority_first_then_arrival_and_a_pages_own_line_before_any():
    broker = Pages("main").broker
    holder = await broker.acquire("main", wait_s=None)
    with override_settings(MAX_PAGES=1):
        order = []

        async def wait(target: str, priority: int, tag: str) -> None:
            claim = await broker.wait(broker.join(target, priority=priority, job_id=tag))
            order.append(tag)
            broker.release(claim)

        waiting = [
            asyncio.create_task(wait(ANY, 9, "any-9")),
            asyncio.create_task(wait("main", 0, "main-0")),
            asyncio.create_task(wait("main", 2, "main-2a")),
            asyncio.create_task(wait("main", 2, "main-2b")),
        ]
        await asyncio.sleep(0)
        broker.check()
        broker.release(holder)
        await asyncio.gather(*waiting)
    assert order == ["main-2a", "main-2b", "main-0", "any-9"]


async def test_a_waiter_on_any_gets_a_pool_page_opened_while_there_is_room():
    pages = Pages("main")
    broker = pages.broker
    holder = await broker.acquire("main", wait_s=None)
    with override_settings(MAX_PAGES=2):
        claim = await broker.wait(broker.join(ANY, job_id="queued"), deadline=None)
    assert claim.page.name == "pool-1" and pages.opened == ["pool-1"]
    broker.check()
    broker.release(claim)
    broker.release(holder)


async def test_a_leased_page_is_not_anys_until_its_lease_is_released():
    pages = Pages("main")
    broker = pages.broker
    lease = broker.take_lease(pages.pages["main"], 3600, None)
    with override_settings(MAX_PAGES=1):
        waiter = broker.join(ANY)
        await asyncio.sleep(0)
        assert waiter.waiting
        broker.check()
        broker.release_lease(pages.pages["main"], lease.id)
        claim = await broker.wait(waiter)
    assert claim.page.name == "main"
    broker.release(claim)


async def test_a_page_closed_under_its_waiters_answers_them():
    pages = Pages("main", "p1")
    broker = pages.broker
    holder = await broker.acquire("p1", wait_s=None)
    waiters = [asyncio.create_task(broker.acquire("p1", wait_s=5)) for _ in range(3)]
    await asyncio.sleep(0)
    pages.close("p1")
    for waiter in waiters:
        with pytest.raises(PageNotOpen, match="Page p1 was closed."):
            await waiter
    broker.release(holder)  # the holder lets the closed page go: nobody gets it
    broker.check()


async def test_a_waiter_on_any_gets_a_page_whose_lease_ends_after_it_joined():
    pages = Pages("main")
    broker = pages.broker
    broker.take_lease(pages.pages["main"], 0.05, None)  # idle, leased, nobody offers it again by hand
    with override_settings(MAX_PAGES=1):
        claim = await asyncio.wait_for(broker.wait(broker.join(ANY)), 5)
    assert claim.page.name == "main" and claim.lease is None
    broker.release(claim)


async def test_waiters_for_a_page_whose_tab_did_not_open_are_answered():
    pages = Pages("main")
    broker = pages.broker
    opening = pages.reserve("p1")  # held by its opening
    waiter = asyncio.create_task(broker.acquire("p1", wait_s=5))
    await asyncio.sleep(0)
    pages.drop(opening)  # its tab did not open
    with pytest.raises(PageNotOpen):
        await asyncio.wait_for(waiter, 1)
    broker.check()


async def test_a_page_handed_to_any_is_claimed_though_a_lease_was_taken_before_the_claim():
    pages = Pages("main")
    broker = pages.broker
    waiter = broker.join(ANY)  # handed main at once
    lease = broker.take_lease(pages.pages["main"], 60, None)  # before the waiter resumes
    claim = await broker.wait(waiter)
    assert claim.page.name == "main" and claim.lease is None
    broker.release(claim)
    assert pages.pages["main"].lease is lease


async def settle() -> None:
    """Let the loop run the pool pages' openings (they open at the next turn, tests/support/broker_pages.py)."""
    for _ in range(6):
        await asyncio.sleep(0)


async def test_room_a_closed_page_frees_goes_to_the_job_queued_on_any_not_to_a_later_call():
    """Issue 57's starvation: main busy, p1 idle but leased, a job queued on
    `any`; p1 closed frees room. The queued job used to wait on with the room
    free, and a plain call on `any` that came next opened pool-1 for itself."""
    pages = Pages("main", "p1")
    broker = pages.broker
    with override_settings(MAX_PAGES=2):
        busy = await broker.acquire("main", wait_s=None)
        broker.take_lease(pages.pages["p1"], 3600, None)
        queued = asyncio.create_task(broker.wait(broker.join(ANY, job_id="queued")))
        await settle()
        assert not queued.done()  # no room, no page: it waits
        broker.check()
        pages.close("p1")  # its lease holder closes it (DELETE /api/v1/p1)
        plain = asyncio.create_task(broker.acquire(ANY, wait_s=None))  # a plain call arrives next
        await settle()
        broker.check()
        assert queued.done(), "the job queued on any still waits, with room free"
        assert queued.result().page.name == "pool-1" and pages.opened == ["pool-1"]
        assert not plain.done()  # behind the queued job: MAX_PAGES are open, both busy
        broker.release(queued.result())
        claim = await plain
        assert claim.page.name == "pool-1"
        broker.release(claim)
        broker.release(busy)
        broker.check()


class FailingOnce(Pages):
    """Pages whose first pool page does not open (the browser was down)."""

    async def open_tab_of(self, page: ManagedPage) -> None:
        await asyncio.sleep(0)
        if not self.opened:
            self.opened.append("failed")
            raise BrowserNotRunning("The browser is not running.", page.name)
        self.opened.append(page.name)


async def test_after_an_opening_for_any_failed_a_later_call_waits_behind_the_earlier_waiter():
    pages = FailingOnce("main")
    broker = pages.broker
    with override_settings(MAX_PAGES=2):
        busy = await broker.acquire("main", wait_s=None)
        queued = asyncio.create_task(broker.wait(broker.join(ANY, job_id="queued")))
        await settle()
        assert pages.opened == ["failed"] and not queued.done()  # room free, but not tried again in a loop
        broker.check()
        plain = asyncio.create_task(broker.acquire(ANY, wait_s=None))  # used to open pool-1 for itself
        await settle()
        broker.check()
        assert queued.done() and queued.result().page.name == "pool-1" and not plain.done()
        broker.release(queued.result())
        broker.release(await plain)
        broker.release(busy)
