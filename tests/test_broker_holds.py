"""The broker as the one owner of who holds a page, in-process (browser/broker.py):
a lease ended by its own timer, reads that change nothing, driver holds
beside claims, and one tab per page when two holders find it crashed
(issue 57, item 1)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.test import override_settings

from browser.pages import ManagedPage
from browser.pool import close_idle, is_free
from browser.purge import skip_reason
from browser.registry import PageRegistry
from browser.runner import BrowserState
from core.api import status_of
from core.errors import LeaseRequired, PageBusy, PageNotOpen
from core.events import Event
from core.routes import ANY
from core.runtime import Tasks
from tests.support.broker_pages import Pages


class Heard:
    """A bus that keeps what is published on it, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Event, str | None]] = []

    def publish(self, event: Event, *, page_id: str | None, job_id: str | None = None, detail: Any = None) -> None:
        self.events.append((event, page_id))

    def of(self, event: Event) -> list[str | None]:
        return [page_id for heard, page_id in self.events if heard == event]


async def until(condition, what: str) -> None:
    """Wait on `condition`, checked at each turn of the loop, for at most 10 s."""
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.005)
    assert condition(), what


def pages_heard(*names: str) -> tuple[Pages, Heard]:
    pages, heard = Pages(*names), Heard()
    for page in pages.pages.values():
        page.bus = heard
    return pages, heard


# --- leases -------------------------------------------------------------------------------------


async def test_a_lease_ends_at_its_time_publishing_once_with_nobody_reading_and_its_page_goes_to_any():
    pages, heard = pages_heard("main")
    broker = pages.broker
    main = pages.pages["main"]
    broker.take_lease(main, 0.05, None)
    # Nobody reads the page, nobody waits: the lease ends by itself, and says so once.
    await until(lambda: heard.of(Event.PAGE_RELEASED), "page.released published at the lease's end")
    assert main.lease is None and heard.of(Event.PAGE_RELEASED) == ["main"]
    main.state()
    assert heard.of(Event.PAGE_RELEASED) == ["main"]  # reading it after publishes nothing more
    broker.check()
    # Leased again, with a waiter on `any` and no room: the lease's end hands it main.
    broker.take_lease(main, 0.05, None)
    with override_settings(MAX_PAGES=1):
        waiter = broker.join(ANY, job_id="queued")
        broker.check()
        claim = await asyncio.wait_for(broker.wait(waiter), 10)
    assert claim.page is main and heard.of(Event.PAGE_RELEASED) == ["main", "main"]
    broker.release(claim)
    broker.check()


async def test_reading_a_page_publishes_nothing_and_changes_nothing():
    pages, heard = pages_heard("main")
    broker = pages.broker
    main = pages.pages["main"]
    lease = broker.take_lease(main, 60, None)
    lease.expires_at = time.monotonic() - 1  # past its time, before its timer fires
    before = list(heard.events)
    state = main.state()
    assert state["leased"] is True and state["lease_expires_in"] == 0
    assert not is_free(main) and skip_reason(main) == "leased"
    assert main.check_lease(lease.id) is lease
    assert heard.events == before and main.lease is lease  # what GET /pages, pool and purge read
    broker.release_lease(main, lease.id)
    assert heard.of(Event.PAGE_RELEASED) == ["main"]


# --- driver holds ---------------------------------------------------------------------------------


async def test_a_plain_call_under_the_lease_while_a_cdp_client_drives_is_refused_at_once_and_a_job_waits():
    pages = Pages("main")
    broker = pages.broker
    main = pages.pages["main"]
    lease = broker.take_lease(main, 60, None)
    driver = await broker.drive(main, lease, kind="a CDP client", wait_s=1)
    second = await broker.drive(main, lease, kind="a CDP client", wait_s=1)  # drivers share a page
    broker.check()
    with pytest.raises(PageBusy) as refused:
        await broker.acquire("main", wait_s=30, lease_id=lease.id)  # refused at once, not after 30 s
    assert status_of(refused.value) == 409
    assert refused.value.message == (
        "Page main is driven by a CDP client under its lease; a call under the lease runs once it detaches."
    )
    with pytest.raises(PageBusy, match="a CDP client drives it"):
        await broker.take_now("main", job_id="started", lease_id=lease.id)
    queued = asyncio.create_task(broker.wait(broker.join("main", job_id="queued", lease_id=lease.id)))
    await asyncio.sleep(0)
    assert not queued.done() and not main.busy  # a driven page is not `busy`: no call or job runs
    broker.check()
    broker.undrive(driver)
    broker.letting_go(second)  # its connection ended: calls wait for it now, not refused
    late = asyncio.create_task(broker.acquire("main", wait_s=30, lease_id=lease.id))
    await asyncio.sleep(0)
    assert not queued.done() and not late.done()
    broker.undrive(second)
    claim = await asyncio.wait_for(queued, 5)
    assert claim.job_id == "queued" and claim.lease is lease
    broker.release(claim)
    broker.release(await asyncio.wait_for(late, 5))
    broker.check()


async def test_a_driver_waits_for_the_call_that_holds_the_page_and_another_lease_is_refused():
    pages = Pages("main")
    broker = pages.broker
    main = pages.pages["main"]
    lease = broker.take_lease(main, 60, None)
    claim = await broker.acquire("main", wait_s=1, lease_id=lease.id)
    driving = asyncio.create_task(broker.drive(main, lease, kind="a CDP client", wait_s=30))
    await asyncio.sleep(0)
    assert not driving.done()
    broker.check()
    broker.release(claim)
    driver = await asyncio.wait_for(driving, 5)
    assert broker.holds(driver) and not broker.holds(claim)
    broker.check()
    broker.undrive(driver)
    with pytest.raises(LeaseRequired):
        await broker.drive(main, None, kind="live control", wait_s=1)  # leased, and not under its lease
    broker.release_lease(main, lease.id)
    pages.close("main")
    with pytest.raises(PageNotOpen):
        await broker.drive(main, None, kind="live control", wait_s=1)


# --- one tab per page -------------------------------------------------------------------------------


class Tab:
    def __init__(self, number: int) -> None:
        self.number = number
        self.url = "about:blank"
        self.closed = False

    def on(self, event: str, handler: Any) -> None:
        pass

    def is_closed(self) -> bool:
        return self.closed

    async def evaluate(self, expression: str) -> int:
        return 1

    async def close(self) -> None:
        self.closed = True


class Browser:
    """A browser that is up and opens tabs when `gate` lets it: no Chromium."""

    def __init__(self) -> None:
        self.state = BrowserState.UP
        self.tasks = Tasks()
        self.listener = None
        self.gate = asyncio.Event()
        self.opened: list[Tab] = []

    async def wait_up(self, timeout_s: float) -> None:
        return None

    async def new_tab(self, timeout_s: float) -> Tab:
        await self.gate.wait()
        self.opened.append(Tab(len(self.opened) + 1))
        return self.opened[-1]


async def test_two_holders_of_a_crashed_page_get_one_new_tab_and_a_hold_let_go_gets_none():
    registry, browser = PageRegistry(), Browser()
    registry.attach(browser, Tab(0))
    main = registry.pages["main"]
    main.crashed = True  # its renderer crashed: the next holder opens a new tab
    lease = registry.broker.take_lease(main, 60, None)
    one = await registry.broker.drive(main, lease, kind="a CDP client", wait_s=1)
    two = await registry.broker.drive(main, lease, kind="a CDP client", wait_s=1)
    both = [asyncio.create_task(registry.ensure_tab(driver, 5)) for driver in (one, two)]
    await asyncio.sleep(0)
    browser.gate.set()
    tabs = await asyncio.wait_for(asyncio.gather(*both), 5)
    assert len(browser.opened) == 1 and tabs[0] is tabs[1] is main.tab is browser.opened[0]
    registry.broker.undrive(one)
    with pytest.raises(PageNotOpen):
        await registry.ensure_tab(one, 5)  # a hold let go drives no tab
    registry.broker.undrive(two)
    registry.broker.check()


async def test_a_page_closed_under_a_driver_ends_its_hold():
    registry = PageRegistry()
    registry.attach(Browser(), Tab(0))
    with override_settings(MAX_PAGES=2):
        page = registry.reserve("p1")
        registry.broker.check()
        page.set_tab(Tab(1))
        registry.broker.opened(page)
        lease = registry.broker.take_lease(page, 60, None)
        driver = await registry.broker.drive(page, lease, kind="a CDP client", wait_s=1)
        await registry.close("p1", lease.id)
    assert page.closed and not registry.broker.holds(driver) and "p1" not in registry.broker.lease_timers
    registry.broker.undrive(driver)
    registry.broker.check()
    assert isinstance(registry.pages["main"], ManagedPage)


async def test_a_page_closed_while_its_tab_reopens_for_a_driver_leaves_no_tab_open():
    registry, browser = PageRegistry(), Browser()
    registry.attach(browser, Tab(0))
    with override_settings(MAX_PAGES=2):
        page = registry.reserve("p1")
        page.set_tab(Tab(1))
        registry.broker.opened(page)
        page.crashed = True  # the driver's call opens a new tab
        lease = registry.broker.take_lease(page, 60, None)
        driver = await registry.broker.drive(page, lease, kind="a CDP client", wait_s=1)
        reopening = asyncio.create_task(registry.ensure_tab(driver, 5))
        await until(lambda: page.tab_opening is not None, "the new tab opening")
        await registry.close("p1", lease.id)  # a driven page may be closed by its lease holder
        browser.gate.set()
        with pytest.raises(PageNotOpen):
            await asyncio.wait_for(reopening, 5)
        await until(lambda: browser.opened and browser.opened[0].closed, "the new tab closed")
    registry.broker.undrive(driver)
    registry.broker.check()


async def test_a_driven_page_is_in_use_for_the_recycle_the_pool_and_the_purge():
    registry = PageRegistry()
    registry.attach(Browser(), Tab(0))
    with override_settings(MAX_PAGES=2, POOL_PAGE_IDLE_S=0):
        pool = registry.reserve("pool-1")
        pool.set_tab(Tab(1))
        registry.broker.opened(pool)
        assert registry.idle() and skip_reason(pool, registry.broker.driven(pool)) is None
        driver = await registry.broker.drive(pool, None, kind="live control", wait_s=1)  # a page nobody leases
        assert not registry.idle() and skip_reason(pool, registry.broker.driven(pool)) == "busy"
        assert await close_idle(registry) == 0 and "pool-1" in registry.pages
        registry.broker.undrive(driver)
        assert registry.idle() and await close_idle(registry) == 1 and "pool-1" not in registry.pages
    registry.broker.check()
