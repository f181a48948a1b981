"""The page broker: the one way a page is taken, whoever takes it.

The broker is the one owner of who holds a page: claims, the waiters it
hands pages to, openings, leases and driver holds are its state, and the
registry (browser/registry.py) reports each page it opens, closes or drops
(`opening`, `opened`, `closed`) rather than setting flags on the page.

A page is taken for a plain call or a primitive (by name or on `any`), a
job that starts at once, a queued job's turn (by name or on `any`), a retry
after its back-off, a job resumed after a restart, and so a schedule's fire
(which starts a job). Each taker is a `Waiter` (browser/pages.py): `join`
takes its place now and never suspends, so a queued job's 202 knows its
position; `wait` waits for its turn, up to a deadline or until a cancel;
`acquire` does both. The `Claim` it answers is let go by `release`, once.

A lease (`take_lease`, `release_lease`) is a hold the broker keeps: a timer
at its end expires it, publishes `page.released` and rebalances; reading a
page's state changes nothing. A driver hold (`drive`, `undrive`) is a CDP
client's connection or a person's input on the live view: several drivers
may share a page, under its lease (or on a page nobody leases), but never
with a claim. A driver attaches when the page is idle or driven and nobody
waits in its line, else it waits its turn; while a driver is attached, a
plain call under the same lease is refused at once (409: its own client
drives the page), and queued jobs wait in the line. One exception, outside
the broker: a person's input on a page whose job asks them (live/human.py)
runs inside that job's claim, since it is what the job waits for. A driver
whose connection ended (`letting_go`) still holds the page while it undoes
what it set, but calls under the lease wait for it rather than 409.

Every change of occupancy (a release, a page opened or closed, a lease
ended, a driver gone, room freed) ends in one `rebalance`: idle pages
offered to their waiters, then pool pages opened while `any` waits and
there is room.

Who gets a page that frees: the waiters that named it first; then, when the
page is unleased, the waiters on `any`. Within a line, the highest priority
first, then arrival. Room (`Opener.room`) that frees (a page closed or
dropped, a CDP client's tab, a relaunch) or that a waiter joining `any`
finds gets a pool page (`pool-1`, ...) for each waiter on `any` none is being
opened for, handed to the first in line. A caller on `any` takes only pages
or room no waiter on `any` waits for; else it joins behind them (`acquire`)
or is refused (`take_now`).

Invariants, asserted by `check()`, which the property test
(tests/test_broker_registry_property.py) calls after every step of random
interleavings of every entry point, over the real registry (acquire,
take_now, join and wait, cancel, deadline, leases, driver holds, open,
close, drop, a crash, a relaunch):

1. No idle page while someone waits for it: an open page nobody holds (no
   claim, no driver) has nobody waiting in its line, no driver waiting for
   it, nor, when it is unleased, anyone in the line of `any`.
2. Priority first, then arrival: a page goes to the first waiter of the
   line it is owed to (`Line.pop`, a heap on (-priority, arrival)).
3. A cancelled or expired waiter never gets a page: its cancel or its
   deadline takes it out of its line in the same step, and a page handed to
   it just before goes on to the next (`leave`).
4. No page is held twice: a held page has exactly one holder, its claim, the
   waiter it was handed to, or its own opening.
5. A page closed under its waiters answers them: PageNotOpen.
6. No room while more wait on `any` than pages are opened for them; after an
   opening failed, from the next change (a browser down is not asked in a loop).
7. No tab driven without a hold, and never by a claim and a driver at once:
   a claim's page is held, a driver's page is open and not held, and
   `ensure_tab` answers a holder only (browser/registry.py).
8. At most one tab per page: one opening of a tab per page at a time;
   other holders await it (`ensure_tab`).
9. A lease nobody calls under has its timer: it ends at its time without
   anyone reading it.

Everything runs on the worker's event loop, and nothing is awaited between a
check and the change it allows.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from typing import Protocol

from django.conf import settings

from browser.pages import Claim, Driver, Lease, Line, ManagedPage, Waiter
from browser.pool import next_pool_name
from core.errors import LeaseRequired, PageBusy, PageNotOpen
from core.events import Event
from core.routes import ANY
from core.runtime import Tasks

log = logging.getLogger("penelope.pages")


class WaitCancelled(Exception):
    """The waiter's cancel was set (a client cancelled its job) before it took a page."""


class Opener(Protocol):
    """What the broker needs of the page registry: its pages, their opening, its tasks."""

    pages: dict[str, ManagedPage]
    tasks: Tasks

    def reserve(self, page_id: str) -> ManagedPage: ...  # a new page, reported `opening`, before it has a tab

    async def open_tab_of(self, page: ManagedPage) -> None: ...  # give a reserved page its tab; raises when none opens

    def drop(self, page: ManagedPage) -> None: ...  # forget a reserved page whose tab could not be opened

    def room(self) -> int: ...  # how many more tabs MAX_PAGES allows now (open and opening pages count)


class Broker:
    def __init__(self, registry: Opener) -> None:
        self.registry = registry
        self.any_line = Line()
        self._arrivals = itertools.count()
        self._opening_for_any = 0  # pool pages being opened for the waiters on `any`
        self._opening_failed = False  # the last of them failed, and nothing changed since (invariant 6)
        # Who holds each held page (invariant 4): its claim, or the waiter it was handed to.
        self.claims: dict[str, Claim] = {}
        self.handed: dict[str, Waiter] = {}
        # The driver holds attached to each page, and the drivers waiting for one (invariant 7).
        self.drivers: dict[str, list[Driver]] = {}
        self.driver_waits: dict[str, list[tuple[Driver, asyncio.Future]]] = {}
        # The timer at the end of each page's lease nobody calls under (invariant 9).
        self.lease_timers: dict[str, tuple[ManagedPage, asyncio.TimerHandle]] = {}  # by name: the page it is for, and it

    @property
    def pages(self) -> dict[str, ManagedPage]:
        return self.registry.pages

    # --- taking a page ---------------------------------------------------------------------

    async def acquire(
        self, target: str, *, wait_s: float | None, priority: int = 0, job_id: str | None = None,
        lease_id: str | None = None,
    ) -> Claim:
        """A claim on page `target`, or on any page, waiting in line up to
        `wait_s` (None: without end): PageBusy past it. On `any`, a free page
        is taken, or a pool page opened, before any wait, unless others wait."""
        if target == ANY and not len(self.any_line):  # else behind them: first come, first served
            claim = await self._any_now(job_id)
            if claim is not None:
                return claim
        waiter = self.join(target, priority=priority, job_id=job_id, lease_id=lease_id)
        try:
            return await self.wait(waiter, deadline=None if wait_s is None else time.monotonic() + wait_s)
        except TimeoutError:
            raise self.busy_error(target) from None

    async def take_now(self, target: str, *, job_id: str, lease_id: str | None = None) -> Claim:
        """A job's start without a queue: page `target` idle with nobody in
        its line, or on `any` a free page or a pool page opened now, neither
        one the line of `any` waits for; PageBusy at once otherwise."""
        if target != ANY:
            return self._take_now(target, lease_id, job_id)
        claim = await self._any_now(job_id)
        if claim is None:
            raise PageBusy(f"No page is free: all {settings.MAX_PAGES} pages (MAX_PAGES) are busy or leased.", ANY)
        return claim

    def join(self, target: str, *, priority: int = 0, job_id: str | None = None, lease_id: str | None = None) -> Waiter:
        """A place in line, taken now. The page is handed at once when it is
        free and nobody is ahead; a lease the waiter names is checked now
        and kept alive while it waits."""
        future = asyncio.get_running_loop().create_future()
        waiter = Waiter(target, (-priority, next(self._arrivals)), future, job_id, lease_id)
        if target == ANY:
            if lease_id is not None:
                raise LeaseRequired("X-Lease does not apply to any: it runs on a page nobody leases.", ANY)
            page = next((page for page in self.pages.values() if self._free_for_any(page)), None)
            if page is not None:
                self._hand(page, waiter)
            else:
                self.any_line.push(waiter)
                self.open_for_any()
            return waiter
        page = self._open_page(target)
        lease = page.check_lease(lease_id)
        driving = [driver for driver in self.drivers.get(page.name, ()) if not driver.leaving]
        if driving and lease is not None and job_id is None:
            raise PageBusy(
                f"Page {page.name} is driven by {driving[0].kind} under its lease; a call under the lease "
                "runs once it detaches.", page.name,
            )
        waiter.lease = lease
        if lease is not None:
            lease.active_calls += 1
        if not page.held and page.name not in self.drivers and not len(page.line):
            self._hand(page, waiter)
        else:
            page.line.push(waiter)
        return waiter

    async def wait(self, waiter: Waiter, *, deadline: float | None = None, cancel: asyncio.Future | None = None) -> Claim:
        """The waiter's claim once its turn comes. TimeoutError past
        `deadline` (time.monotonic()); WaitCancelled once `cancel` is set;
        either way the waiter has left its line, and a page handed to it just
        before went on. PageNotOpen when its page was closed, LeaseRequired
        when the lease it waited under is gone."""
        if waiter.waiting:
            loop = asyncio.get_running_loop()
            timer = None if deadline is None else loop.call_later(max(0.0, deadline - time.monotonic()), self.expire, waiter)
            expire: Callable[[asyncio.Future], None] = lambda _: self.expire(waiter)  # noqa: E731
            if cancel is not None:
                cancel.add_done_callback(expire)
            try:
                await asyncio.wait({waiter.future})
            except asyncio.CancelledError:  # the caller went away (a client gone, the worker stops)
                self.leave(waiter)
                raise
            finally:
                if timer is not None:
                    timer.cancel()
                if cancel is not None:
                    cancel.remove_done_callback(expire)
        if cancel is not None and cancel.done():
            self.leave(waiter)
            raise WaitCancelled
        if waiter.future.cancelled():
            raise TimeoutError
        self._done_waiting(waiter)
        page = waiter.future.result()  # PageNotOpen: its page was closed under it
        return self._claim(page, waiter.lease_id, waiter.job_id, waiter)

    def expire(self, waiter: Waiter) -> None:
        """The waiter's time ran out, or its cancel was set: out of its line now."""
        if waiter.waiting:
            self.leave(waiter)

    def leave(self, waiter: Waiter) -> None:
        """A waiter gives its place up; a page handed to it just now goes on."""
        self._done_waiting(waiter)
        if waiter.handed:
            page = waiter.future.result()
            if self.handed.get(page.name) is waiter:
                del self.handed[page.name]
                page.held = False
                self.rebalance()
            return
        waiter.future.cancel()
        line = self.any_line if waiter.target == ANY else getattr(self.pages.get(waiter.target), "line", None)
        if line is not None:
            line.remove(waiter)

    def release(self, claim: Claim) -> None:
        """Let a claimed page go: to the next it is owed to, or idle. Once."""
        if claim.released:
            return
        claim.released = True
        page = claim.page
        if self.claims.get(page.name) is claim:
            del self.claims[page.name]
        if claim.lease is not None:
            self._call_ended(claim.lease, page)
        if claim.job_id and page.job_id == claim.job_id:
            page.job_id = None
        page.held = False
        page.last_used = time.monotonic()
        page.publish(Event.PAGE_IDLE, job_id=claim.job_id)
        self.rebalance()

    def rebalance(self) -> None:
        """The one step every change of occupancy ends in: each idle page
        offered to whoever it is owed to, then pool pages opened while
        `any` waits and there is room (invariants 1 and 6)."""
        for page in list(self.pages.values()):
            self.offer(page)
        self.open_for_any()

    def offer(self, page: ManagedPage) -> None:
        """Hand an idle page to the first waiter it is owed to: its own line,
        then the drivers waiting for it, then, unleased, the line of `any`."""
        if page.held or page.closed or page.name in self.drivers or self.pages.get(page.name) is not page:
            return
        waiter = page.line.pop()
        if waiter is None and page.name in self.driver_waits:
            for driver, attached in self.driver_waits.pop(page.name):
                try:
                    self._check_driver(driver)
                except LeaseRequired as error:
                    attached.set_exception(error)
                    continue
                self.drivers.setdefault(page.name, []).append(driver)
                attached.set_result(driver)
            if page.name in self.drivers:
                return
        if waiter is None and page.lease is None:
            waiter = self.any_line.pop()
        if waiter is not None:
            self._hand(page, waiter)

    # --- what the registry reports -------------------------------------------------------

    def opening(self, page: ManagedPage) -> None:
        """A page reserved under its name, before its tab exists: held by its
        opening, so no call runs on it and no recycle begins under it."""
        page.opening = page.held = True

    def opened(self, page: ManagedPage) -> None:
        """A reserved page has its tab: free for whoever waits."""
        page.opening = page.held = False
        self.rebalance()

    def closed(self, page: ManagedPage) -> None:
        """The page was closed, or dropped: whoever waits for it is answered
        PageNotOpen, its lease and drivers end with it, and the room it
        leaves goes to the waiters on `any`."""
        self._forget(page)
        self.rebalance()

    def detached(self, pages: list[ManagedPage]) -> None:
        """The browser is gone for good (the worker stops, its tasks cancelled
        already): every page closed and its lease's timer stopped; nothing
        is answered (a job waiting still is resumed at the next start) and
        nothing opened."""
        for page in pages:
            page.closed = True
            self._disarm(page)

    def _forget(self, page: ManagedPage) -> None:
        page.closed = True
        gone = PageNotOpen(f"Page {page.name} was closed.", page.name)
        while (waiter := page.line.pop()) is not None:
            self._done_waiting(waiter)
            waiter.future.set_exception(gone)
        if self.claims.get(page.name) is not None and self.claims[page.name].page is page:
            del self.claims[page.name]  # its holder lets it go in its own time; nobody else gets it
        if (handed := self.handed.get(page.name)) is not None and handed.future.result() is page:
            del self.handed[page.name]  # handed, not yet claimed: its claim finds it closed
            page.held = False
        if any(driver.page is page for driver in self.drivers.get(page.name, ())):
            del self.drivers[page.name]  # they let go in their own time: their `undrive` finds nothing
        for _, attached in self.driver_waits.pop(page.name, []):
            attached.set_exception(gone)
        self._disarm(page)

    def busy_error(self, target: str) -> PageBusy:
        """The 409 of a wait for `target` that ran out."""
        if target == ANY:
            return PageBusy(f"No page is free: all {settings.MAX_PAGES} pages (MAX_PAGES) stayed busy or leased.", ANY)
        page = self.pages.get(target)
        if page is not None and page.job_id:
            return PageBusy(f"Page {target} is busy: job {page.job_id} runs on it.", target)
        return PageBusy(f"Page {target} is busy.", target)

    def position(self, waiter: Waiter) -> int | None:
        """A queued job's place in its line, from 1."""
        if waiter.job_id is None or not waiter.waiting:
            return None
        line = self.any_line if waiter.target == ANY else getattr(self.pages.get(waiter.target), "line", None)
        return None if line is None else line.position(waiter.job_id)

    def jobs_waiting(self, target: str) -> int:
        return (self.any_line if target == ANY else self._open_page(target).line).jobs_waiting()

    # --- inside ---------------------------------------------------------------------------

    def _open_page(self, target: str) -> ManagedPage:
        page = self.pages.get(target)
        if page is None or page.closed:
            raise PageNotOpen(f"Page {target} is not open.", target)
        return page

    def _free_for_any(self, page: ManagedPage) -> bool:
        return not (page.held or page.closed or len(page.line) or page.name in self.drivers) and page.lease is None

    def _hand(self, page: ManagedPage, waiter: Waiter) -> None:
        page.held = True
        self.handed[page.name] = waiter
        waiter.future.set_result(page)

    def _done_waiting(self, waiter: Waiter) -> None:
        lease, waiter.lease = waiter.lease, None
        if lease is not None:
            self._call_ended(lease, self.pages.get(waiter.target))

    def _take_now(self, target: str, lease_id: str | None, job_id: str | None) -> Claim:
        """A job's start on a named page: the page idle with nobody in line, at once; PageBusy otherwise."""
        page = self._open_page(target)
        page.check_lease(lease_id)
        if page.job_id:
            raise PageBusy(f"Page {page.name} already runs job {page.job_id}.", page.name)
        if page.name in self.drivers:
            raise PageBusy(f"Page {page.name} is not idle: {self.drivers[page.name][0].kind} drives it.", page.name)
        if page.held or len(page.line):
            raise PageBusy(f"Page {page.name} is not idle: a call is running on it.", page.name)
        page.held = True
        return self._claim(page, lease_id, job_id)

    def _claim(self, page: ManagedPage, lease_id: str | None, job_id: str | None, waiter: Waiter | None = None) -> Claim:
        """The claim on a page held for the caller; the page goes on when it
        was closed, or its lease changed, while the caller waited. A caller
        on `any` was handed an unleased page: a lease taken since applies
        after its call, as one taken while a call runs does."""
        if waiter is not None and self.handed.get(page.name) is waiter:
            del self.handed[page.name]
        try:
            if page.closed:
                raise PageNotOpen(f"Page {page.name} was closed.", page.name)
            lease = None if waiter is not None and waiter.target == ANY else page.check_lease(lease_id)
        except (PageNotOpen, LeaseRequired):
            page.held = False
            self.rebalance()
            raise
        if lease is not None:
            lease.active_calls += 1
        if job_id is not None:
            page.job_id = job_id
        claim = self.claims[page.name] = Claim(page=page, lease=lease, job_id=job_id)
        page.publish(Event.PAGE_BUSY, job_id=job_id)
        return claim

    async def _any_now(self, job_id: str | None) -> Claim | None:
        """A free page, or a pool page opened now, claimed; None when every
        page is busy or leased and MAX_PAGES are open, or others wait for them."""
        if len(self.any_line) > self._opening_for_any:  # what frees is theirs first
            self.open_for_any()  # after an opening that failed: for them, not for this caller
            return None
        page = next((page for page in self.pages.values() if self._free_for_any(page)), None)
        if page is None:
            if self.registry.room() <= 0:
                return None
            page = self.registry.reserve(next_pool_name(self.pages))
            try:
                await self.registry.open_tab_of(page)
            except BaseException:
                self.registry.drop(page)
                raise
            page.opening = False  # still held: it is this caller's
        page.held = True
        return self._claim(page, None, job_id)

    def open_for_any(self) -> None:
        """Open pool pages for the waiters on `any` while there is room: when
        one joins, and whenever room may have freed (see the docstring above)."""
        self._opening_failed = False  # something changed: try again
        while len(self.any_line) > self._opening_for_any and self.registry.room() > 0:
            page = self.registry.reserve(next_pool_name(self.pages))
            self._opening_for_any += 1
            self.registry.tasks.spawn(self._opened_for_any(page), about=f"opening page {page.name} for a waiter on any")

    async def _opened_for_any(self, page: ManagedPage) -> None:
        try:
            await self.registry.open_tab_of(page)
        except BaseException as error:  # the waiters wait on; their deadlines end them (invariant 6)
            log.warning("page %s could not be opened for a waiter on any: %s", page.name, error)
            self.registry.drop(page)  # still counted as opening here: its room is not tried again at once
            self._opening_failed = True
            if not isinstance(error, Exception):
                raise
            return
        finally:
            self._opening_for_any -= 1
        self.opened(page)

    # --- leases ------------------------------------------------------------------------------

    def take_lease(self, page: ManagedPage, ttl: float, lease_id: str | None) -> Lease:
        """A new lease on the page, or the caller's own lease renewed with a new TTL."""
        lease = page.lease
        if lease is not None:
            page.check_lease(lease_id)
            lease.ttl = ttl
            lease.expires_at = time.monotonic() + ttl
            self._arm(page)
            return lease
        if lease_id:
            raise LeaseRequired("The lease in X-Lease is unknown or expired.", page.name)
        page.lease = Lease(id=secrets.token_hex(16), ttl=ttl, expires_at=time.monotonic() + ttl)
        page.publish(Event.PAGE_LEASED, job_id=page.job_id)
        self._arm(page)
        return page.lease

    def release_lease(self, page: ManagedPage, lease_id: str | None, *, force: bool = False) -> Lease:
        """Release the page's lease, the one in `lease_id`; with `force`, whatever
        its id (an operator's tool for a lease whose id was lost).

        Calls running under a broken lease run on to their end: their claims
        hold the lease object, not the page's slot, so their release restarts
        the old lease's TTL and leaves the page unleased.
        """
        lease = page.lease
        if lease is None:
            raise LeaseRequired(f"Page {page.name} has no lease to release.", page.name)
        if not force:
            page.check_lease(lease_id)
        self._end_lease(page, lease)
        if force:
            log.warning(
                "page %s: lease broken by force, %.1f s after it was taken (%d call(s) under it run on, job %s)",
                page.name, lease.age, lease.active_calls, page.job_id or "none",
            )
        return lease

    def _end_lease(self, page: ManagedPage, lease: Lease) -> None:
        lease.released_at = time.monotonic()
        page.lease = None
        self._disarm(page)
        page.publish(Event.PAGE_RELEASED, job_id=page.job_id)
        self.rebalance()

    def _call_ended(self, lease: Lease, page: ManagedPage | None) -> None:
        """A call under the lease let go: the last one restarts its TTL."""
        lease.active_calls -= 1
        if lease.active_calls == 0:
            lease.expires_at = time.monotonic() + lease.ttl
            if page is not None and page.lease is lease:
                self._arm(page)

    def _arm(self, page: ManagedPage) -> None:
        """The timer at the end of the page's lease, while no call runs under it."""
        self._disarm(page)
        lease = page.lease
        if lease is None or lease.active_calls or page.closed:
            return
        delay = max(0.0, lease.expires_at - time.monotonic())
        self.lease_timers[page.name] = (page, asyncio.get_running_loop().call_later(delay, self._lease_ends, page, lease))

    def _disarm(self, page: ManagedPage) -> None:
        """Its timer goes, this page's only: a page of the same name opened since keeps its own."""
        timed, timer = self.lease_timers.get(page.name, (None, None))
        if timed is page and timer is not None:
            timer.cancel()
            del self.lease_timers[page.name]

    def _lease_ends(self, page: ManagedPage, lease: Lease) -> None:
        """The lease's time is up: it expires here, once, and its page goes to whoever waits."""
        if self.lease_timers.get(page.name, (None,))[0] is page:
            del self.lease_timers[page.name]
        if page.lease is not lease or page.closed or lease.active_calls:
            return  # released, or a call under it runs (its end arms the timer again)
        if lease.expires_at > time.monotonic():  # renewed, or the loop's clock ran a hair early
            self._arm(page)
            return
        self._end_lease(page, lease)

    # --- driver holds ------------------------------------------------------------------------

    async def drive(self, page: ManagedPage, lease: Lease | None, *, kind: str, wait_s: float) -> Driver:
        """A driver hold on the page under `lease` (None: a page nobody
        leases), for `kind` ("a CDP client", "live control"). At once when
        the page is driven already or idle with nobody in its line; else in
        its turn, up to `wait_s` (PageBusy past it). LeaseRequired when the
        page is leased under another lease; PageNotOpen when it closes."""
        driver = Driver(page, lease, kind)
        self._check_driver(driver)
        if not page.held and not len(page.line):
            self.drivers.setdefault(page.name, []).append(driver)
            return driver
        attached = asyncio.get_running_loop().create_future()
        waits = self.driver_waits.setdefault(page.name, [])
        waits.append((driver, attached))
        try:
            await asyncio.wait({attached}, timeout=wait_s)
        except asyncio.CancelledError:  # the caller went away (a client gone, the worker stops)
            if attached.done() and not attached.cancelled() and attached.exception() is None:
                self.undrive(driver)  # attached just as it went
            attached.cancel()
            raise
        finally:
            if (driver, attached) in waits:
                waits.remove((driver, attached))
                if not waits and self.driver_waits.get(page.name) is waits:
                    del self.driver_waits[page.name]
        if not attached.done():
            attached.cancel()
            raise PageBusy(f"Page {page.name} is busy: a call or a job runs on it.", page.name)
        return attached.result()

    def letting_go(self, driver: Driver) -> None:
        """The driver's connection ended: it undoes what it set before it lets
        go, and calls under the lease wait for that in line, not refused."""
        driver.leaving = True

    def undrive(self, driver: Driver) -> None:
        """Let a driver hold go, once: the last one frees the page."""
        if driver.released:
            return
        driver.released = True
        drivers = self.drivers.get(driver.page.name, [])
        if driver in drivers:
            drivers.remove(driver)
            if not drivers:
                del self.drivers[driver.page.name]
                self.rebalance()

    def driven(self, page: ManagedPage) -> bool:
        """Whether a driver hold (a CDP client, live control) is on the page:
        for the readers that leave a page in use alone (a recycle, the pool's
        idle close, the purge)."""
        return any(driver.page is page for driver in self.drivers.get(page.name, ()))

    def holds(self, hold: Claim | Driver) -> bool:
        """Whether `hold` holds its page now: a claim not let go, or a driver attached."""
        if isinstance(hold, Claim):
            return not hold.released and self.claims.get(hold.page.name) is hold
        return not hold.released and hold in self.drivers.get(hold.page.name, ())

    def _check_driver(self, driver: Driver) -> None:
        page = driver.page
        if page.closed or self.pages.get(page.name) is not page:
            raise PageNotOpen(f"Page {page.name} is not open.", page.name)
        if page.lease is not None and page.lease is not driver.lease:
            raise LeaseRequired(f"The lease {driver.kind} drives under no longer holds page {page.name}.", page.name)

    # --- the invariants ----------------------------------------------------------------------

    def check(self) -> None:
        """Assert the invariants of the module's docstring."""
        waiting_any = [waiter for waiter in self.any_line.waiters if waiter.waiting]
        for name, page in self.pages.items():
            holders = [holder for holder in (self.claims.get(name), self.handed.get(name)) if holder is not None]
            holders += ["opening"] if page.opening else []
            assert len(holders) == (1 if page.held else 0), f"page {name}: held={page.held}, holders {holders}"
            for waiter in page.line.waiters:
                assert waiter.waiting, f"a waiter in page {name}'s line that waits no more"
            lease = page.lease
            timed = self.lease_timers.get(name, (None,))[0] is page
            assert lease is None or lease.active_calls or timed, f"page {name}: a lease without its timer"
            driven = self.drivers.get(name, [])
            assert not (page.held and driven), f"page {name} is held by a claim and {len(driven)} driver(s) at once"
            assert all(driver.page is page and not driver.released for driver in driven), f"page {name}: a stale driver"
            if page.held or driven:
                continue
            assert not len(page.line), f"page {name} is idle while {len(page.line)} wait for it"
            assert not self.driver_waits.get(name), f"page {name} is idle while drivers wait for it"
            assert lease is not None or not waiting_any, f"page {name} is idle while {len(waiting_any)} wait for any"
        for waiter in self.any_line.waiters:
            assert waiter.waiting, "a waiter in the line of any that waits no more"
        assert len(waiting_any) <= self._opening_for_any or self.registry.room() <= 0 or self._opening_failed, "room free while any waits"
        for name, waiter in self.handed.items():
            assert waiter.handed and waiter.future.result() is self.pages.get(name, waiter.future.result())
        for name, claim in self.claims.items():
            assert claim.page.held or claim.page.closed, f"page {name}: a claim on a page not held"
        assert all(name in self.pages for name in self.drivers), "a driver on a page not open"
