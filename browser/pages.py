"""Named pages (browser tabs), their one-at-a-time lock and their leases.

Everything here lives in memory and on the event loop. A page knows a job only
as the id that holds it. Each change a client can see (busy, idle, leased,
released, crashed) is published on the event bus (core/events.py).

A page outlives its tab: a tab whose renderer crashed, or that went with a
browser that stopped, is replaced under the same name before the page's next
call, and the page's lease, waiters and name are kept. The call in hand when
the tab went answers 502 (`run_claimed` in plugins/calls.py compares the
page's `tab_generation` before and after it).
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from browser.runner import BrowserState, BrowserUnavailable, Cause
from browser.tabs import close_quietly, new_tab, url_of
from core import events, metrics
from core.errors import (
    BrowserNotRunning,
    InvalidPageId,
    LeaseRequired,
    PageAlreadyOpen,
    PageBusy,
    PageNotOpen,
    PageStaysOpen,
    TabLost,
    TooManyPages,
)
from core.events import Event
from core.tasks import spawn

if TYPE_CHECKING:
    from playwright.async_api import Page

    from browser.runner import Browser

log = logging.getLogger("penelope.pages")

PAGE_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAIN_PAGE = "main"

# First path segments the API router already uses; a page cannot take them.
RESERVED_PAGE_IDS = frozenset(
    {"pages", "jobs", "media", "activity", "health", "workload", "purge", "schema", "events", "metrics"}
)


def page_of_path(path: str) -> str | None:
    """The page a request path names (`/api/v1/<page_id>/...`), or None."""
    prefix = "/api/v1/"
    if not path.startswith(prefix):
        return None
    segment = path[len(prefix):].split("/", 1)[0]
    return segment if PAGE_ID_PATTERN.fullmatch(segment) and segment not in RESERVED_PAGE_IDS else None


def validate_page_id(page_id: str) -> str:
    if not PAGE_ID_PATTERN.fullmatch(page_id or ""):
        raise InvalidPageId(
            "A page id is 1 to 32 characters of a-z, 0-9, '_' and '-', starting with a letter or digit.",
        )
    if page_id in RESERVED_PAGE_IDS:
        raise InvalidPageId(f"'{page_id}' is a word the API uses and cannot name a page.")
    return page_id


@dataclass
class Lease:
    """A page reserved for one client's flow. It never expires while a call
    under it runs; its TTL restarts when the last such call ends."""

    id: str
    ttl: float
    expires_at: float  # time.monotonic()
    active_calls: int = 0
    taken_at: float = field(default_factory=time.monotonic)  # renewals keep it
    released_at: float | None = None

    @property
    def age(self) -> float:
        """Seconds from its taking to its release, or to now while it is held."""
        end = self.released_at if self.released_at is not None else time.monotonic()
        return end - self.taken_at

    def expired(self, now: float) -> bool:
        return self.active_calls == 0 and now >= self.expires_at

    def expires_in(self, now: float) -> float:
        if self.active_calls:
            return self.ttl
        return max(0.0, self.expires_at - now)


@dataclass
class Claim:
    """One caller's hold on a page, from acquire to release."""

    page: ManagedPage
    lease: Lease | None
    job_id: str | None = None
    released: bool = False


PAGE_CRASHED = "page_crashed"  # a `reopened` cause besides the browser's (browser.runner.Cause)


@dataclass
class ManagedPage:
    name: str
    tab: Page | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    job_id: str | None = None
    lease: Lease | None = None
    waiting: int = 0
    closed: bool = False
    # The tab's renderer crashed: the tab is replaced before the next call.
    crashed: bool = False
    # Counts the tabs this page lost (a crash, a browser that stopped or was
    # recycled): a call that sees it change lost its tab under it.
    tab_generation: int = 0
    # Why the last tab was lost, said to the call that was on it.
    fault: str | None = None
    # BROWSER_REFUSE_PRIVATE refused a navigation of the tab during the call in hand: why.
    refused: str | None = None
    # POST /pages is opening its first tab (the page is locked meanwhile).
    opening: bool = False
    # Where the tab was when the browser went, for `reopened`.
    lost_url: str = ""
    # Ends the call in hand when its tab is lost (set by plugins.calls.run_claimed).
    on_tab_lost: Callable[[], None] | None = None
    # The last replacement of the tab, shown in the page's state:
    # {"cause", "at", "lost_url"}; a client compares `at` with its last call.
    reopened: dict | None = None

    def __post_init__(self) -> None:
        if self.tab is not None:
            self.set_tab(self.tab)

    # --- the tab ---------------------------------------------------------------

    def set_tab(self, tab: Page) -> None:
        """Make `tab` the page's tab, watched for its renderer's crash."""
        self.tab = tab
        self.crashed = False
        tab.on("crash", lambda crashed: self._tab_crashed(crashed))

    def _tab_crashed(self, tab: Page) -> None:
        """Playwright's `crash` event: the renderer is gone, the tab is dead."""
        if tab is not self.tab or self.crashed:
            return
        self.crashed = True
        self.tab_lost(f"Page {self.name}'s renderer crashed during the call; the page is reopened for the next call.")
        metrics.page_crashed()
        log.warning("page %s: the renderer crashed (at %s)", self.name, url_of(tab) or "about:blank")
        events.publish(Event.PAGE_CRASHED, page_id=self.name, job_id=self.job_id, detail={"url": url_of(tab)})

    def tab_lost(self, fault: str) -> None:
        self.tab_generation += 1
        self.fault = fault
        if self.on_tab_lost is not None:
            self.on_tab_lost()

    @property
    def tab_state(self) -> str:
        """`open`, `crashed` (reopened at the next call) or `closed` (the
        browser is being launched again, or the tab was closed by an action)."""
        if self.tab is None or self.tab.is_closed():
            return "closed"
        return "crashed" if self.crashed else "open"

    def mark_reopened(self, cause: str, lost_url: str) -> None:
        self.reopened = {"cause": cause, "at": round(time.time(), 3), "lost_url": lost_url or None}

    # --- leases ---------------------------------------------------------------

    def current_lease(self) -> Lease | None:
        if self.lease is not None and self.lease.expired(time.monotonic()):
            self.lease = None  # found expired: released now
            self._publish(Event.PAGE_RELEASED)
        return self.lease

    def _publish(self, event: Event) -> None:
        events.publish(event, page_id=self.name, job_id=self.job_id)

    def check_lease(self, lease_id: str | None) -> Lease | None:
        """The lease a call runs under, or 423 when the call may not run."""
        lease = self.current_lease()
        if lease is None:
            if lease_id:
                raise LeaseRequired("The lease in X-Lease is unknown or expired.", self.name)
            return None
        if not lease_id:
            raise LeaseRequired(f"Page {self.name} is leased; send its lease in X-Lease.", self.name)
        if not secrets.compare_digest(lease_id.encode(), lease.id.encode()):
            raise LeaseRequired(f"The lease in X-Lease does not hold page {self.name}.", self.name)
        return lease

    def take_lease(self, ttl: float, lease_id: str | None) -> Lease:
        """A new lease, or the caller's own lease renewed with a new TTL."""
        lease = self.current_lease()
        if lease is not None:
            self.check_lease(lease_id)
            lease.ttl = ttl
            lease.expires_at = time.monotonic() + ttl
            return lease
        if lease_id:
            raise LeaseRequired("The lease in X-Lease is unknown or expired.", self.name)
        self.lease = Lease(id=secrets.token_hex(16), ttl=ttl, expires_at=time.monotonic() + ttl)
        self._publish(Event.PAGE_LEASED)
        return self.lease

    def release_lease(self, lease_id: str | None, *, force: bool = False) -> Lease:
        """Release the page's lease, the one in `lease_id`; with `force`, whatever
        its id (an operator's tool for a lease whose id was lost).

        Calls running under a broken lease run on to their end: their claims
        hold the lease object, not the page's slot, so their release restarts
        the old lease's TTL and leaves the page unleased.
        """
        lease = self.current_lease()
        if lease is None:
            raise LeaseRequired(f"Page {self.name} has no lease to release.", self.name)
        if not force:
            self.check_lease(lease_id)
        lease.released_at = time.monotonic()
        self.lease = None
        self._publish(Event.PAGE_RELEASED)
        if force:
            log.warning(
                "page %s: lease broken by force, %.1f s after it was taken (%d call(s) under it run on, job %s)",
                self.name, lease.age, lease.active_calls, self.job_id or "none",
            )
        return lease

    # --- the one-at-a-time lock -----------------------------------------------

    @property
    def busy(self) -> bool:
        return self.lock.locked()

    def _busy_error(self) -> PageBusy:
        if self.job_id:
            return PageBusy(f"Page {self.name} is busy: job {self.job_id} runs on it.", self.name)
        return PageBusy(f"Page {self.name} is busy.", self.name)

    async def acquire(self, lease_id: str | None, wait_s: float) -> Claim:
        """Wait in arrival order for the page, up to `wait_s`, then 409.

        A caller cancelled while waiting (its client went away) leaves the queue.
        """
        self.check_lease(lease_id)
        self.waiting += 1
        try:
            async with asyncio.timeout(wait_s):
                await self.lock.acquire()
        except TimeoutError:
            raise self._busy_error() from None
        finally:
            self.waiting -= 1
        return self._claim(lease_id)

    async def try_acquire(self, lease_id: str | None, job_id: str) -> Claim:
        """Claim an idle page for a job at once, or 409 without waiting."""
        self.check_lease(lease_id)
        if self.job_id:
            raise PageBusy(f"Page {self.name} already runs job {self.job_id}.", self.name)
        if self.lock.locked() or self.waiting:
            raise PageBusy(f"Page {self.name} is not idle: a call is running on it.", self.name)
        # An unlocked lock with no waiters is taken without suspending, so no
        # other caller can slip in between the check above and this line.
        await self.lock.acquire()
        claim = self._claim(lease_id, job_id)
        self.job_id = job_id
        return claim

    def _claim(self, lease_id: str | None, job_id: str | None = None) -> Claim:
        # The page may have been closed or leased while this caller waited.
        try:
            if self.closed:
                raise PageNotOpen(f"Page {self.name} was closed.", self.name)
            lease = self.check_lease(lease_id)
        except (PageNotOpen, LeaseRequired):
            self.lock.release()
            raise
        if lease is not None:
            lease.active_calls += 1
        events.publish(Event.PAGE_BUSY, page_id=self.name, job_id=job_id)
        return Claim(page=self, lease=lease, job_id=job_id)

    def release(self, claim: Claim) -> None:
        if claim.released:
            return
        claim.released = True
        if claim.lease is not None:
            claim.lease.active_calls -= 1
            if claim.lease.active_calls == 0:
                claim.lease.expires_at = time.monotonic() + claim.lease.ttl
        if claim.job_id and self.job_id == claim.job_id:
            self.job_id = None
        self.lock.release()
        events.publish(Event.PAGE_IDLE, page_id=self.name, job_id=claim.job_id)

    def state(self) -> dict:
        lease = self.current_lease()
        now = time.monotonic()
        url = ""
        if self.tab is not None and not self.tab.is_closed() and not self.crashed:
            url = self.tab.url
        return {
            "page_id": self.name,
            "busy": self.busy,
            "waiting": self.waiting,
            "job_id": self.job_id,
            "leased": lease is not None,
            "lease_expires_in": round(lease.expires_in(now), 3) if lease else None,
            "url": url,
            "tab": self.tab_state,
            "reopened": self.reopened,
        }


class PageRegistry:
    """The open pages by name, at most MAX_PAGES of them; what the browser
    tells of its stops and relaunches (browser.runner.BrowserListener)."""

    def __init__(self) -> None:
        self.browser: Browser | None = None
        self.pages: dict[str, ManagedPage] = {}

    def attach(self, browser: Browser, first_tab: Page) -> None:
        self.browser = browser
        browser.listener = self
        self.pages = {MAIN_PAGE: ManagedPage(MAIN_PAGE, first_tab)}

    def detach(self) -> None:
        for page in self.pages.values():
            page.closed = True
        self.pages = {}
        if self.browser is not None:
            self.browser.listener = None
        self.browser = None

    # --- the browser's news ----------------------------------------------------------

    def browser_down(self, cause: Cause) -> None:
        """Every tab went with the browser: the calls on them answer 502."""
        message = (
            "The browser stopped during the call; it is being launched again."
            if cause == Cause.BROWSER_STOPPED
            else "The browser was recycled during the call."
        )
        for page in self.pages.values():
            page.lost_url = url_of(page.tab) or page.lost_url
            page.tab_lost(message)

    async def browser_up(self, first_tab: Page, cause: Cause) -> None:
        """Reopen every page under its name in the new browser: main on its
        first tab, the others in new tabs. Their URLs are lost; each page's
        state says so (`reopened`). A page being opened gets its tab from its
        opener, who waits for this browser; a page closed meanwhile gets none."""
        for name, page in list(self.pages.items()):
            if page.opening:
                continue
            tab = first_tab if name == MAIN_PAGE else await new_tab(self.browser, name)
            if self.pages.get(name) is not page or page.closed:  # closed while its tab opened
                spawn(close_quietly(tab, name), about=f"closing the tab of page {name}, closed meanwhile")
                continue
            page.set_tab(tab)
            page.mark_reopened(cause.value, page.lost_url)
            page.lost_url = ""

    def idle(self) -> bool:
        return not any(page.busy or page.waiting for page in self.pages.values())

    def navigation_refused(self, tab: Page, refusal: str) -> None:
        for page in self.pages.values():
            if page.tab is tab:
                page.refused = refusal

    def call_ended(self) -> None:
        if self.browser is not None:
            self.browser.call_ended()

    async def wait_for_browser(self, page_id: str, wait_s: float) -> Browser:
        """The browser once it takes calls (a relaunch waited for, up to
        `wait_s`), or 503 naming why not."""
        if self.browser is None:
            raise BrowserNotRunning("The browser is not running.", page_id)
        try:
            await self.browser.wait_up(wait_s)
        except BrowserUnavailable as error:
            raise BrowserNotRunning(str(error), page_id) from None
        return self.browser

    # --- pages -----------------------------------------------------------------------

    def get(self, page_id: str) -> ManagedPage:
        page = self.pages.get(page_id)
        if page is None:
            raise PageNotOpen(f"Page {page_id} is not open.", page_id)
        return page

    async def open(self, page_id: str) -> ManagedPage:
        validate_page_id(page_id)
        if page_id in self.pages:
            raise PageAlreadyOpen(f"Page {page_id} is already open.", page_id)
        if len(self.pages) >= settings.MAX_PAGES:
            raise TooManyPages(
                f"All {settings.MAX_PAGES} pages are open (MAX_PAGES); close one first.", page_id
            )
        if self.browser is None:
            raise BrowserNotRunning("The browser is not running.", page_id)
        # Reserve the name before the await so two openers cannot both pass,
        # and hold its lock (free: no suspension) while its tab opens, so no
        # call runs on it and no recycle begins under it.
        page = ManagedPage(page_id, opening=True)
        self.pages[page_id] = page
        await page.lock.acquire()
        try:
            page.set_tab(await self.open_tab(page_id, settings.PAGE_WAIT_S))
        except BaseException:
            self.pages.pop(page_id, None)
            raise
        finally:
            page.opening = False
            page.lock.release()
        return page

    async def close(self, page_id: str, lease_id: str | None) -> None:
        page = self.get(page_id)
        if page_id == MAIN_PAGE:
            raise PageStaysOpen("Page main is the worker's default page and stays open.", page_id)
        page.check_lease(lease_id)
        if page.opening or page.busy or page.waiting:
            raise page._busy_error()
        page.closed = True
        del self.pages[page_id]
        await close_quietly(page.tab, page.name)

    async def reopen_tab(self, page: ManagedPage) -> None:
        """Close the page's tab and open a new one under the same name: for a
        cancelled job whose plugin would not stop (its browser calls on the old
        tab fail from now on). When no tab can be opened now, the page is left
        without one: its next call opens it (`ensure_tab`)."""
        old, page.tab = page.tab, None
        page.on_tab_lost = None  # the plugin that would not stop is no call of the page's any more
        page.tab_generation += 1
        spawn(close_quietly(old, page.name), about=f"closing the old tab of page {page.name}")
        try:
            tab = await self.open_tab(page.name, settings.PAGE_WAIT_S)
        except (BrowserNotRunning, TabLost) as error:
            log.warning("page %s: no new tab after a cancel (%s); its next call opens one", page.name, error.message)
            return
        if page.tab is None and not page.closed:
            page.set_tab(tab)
        else:
            spawn(close_quietly(tab, page.name), about=f"closing a spare tab of page {page.name}")

    async def ensure_tab(self, page: ManagedPage, wait_s: float) -> Page:
        """The page's tab for a call: once the browser takes calls (a relaunch
        waited for up to `wait_s`, else 503), and opened anew if its renderer
        crashed, it went with the browser, or an action closed it. Nothing is
        awaited between the tab's check and the answer, so the caller's read
        of `tab_generation` right after belongs to this tab."""
        deadline = time.monotonic() + wait_s
        while True:
            browser = await self.wait_for_browser(page.name, max(0.0, deadline - time.monotonic()))
            if page.tab is not None and not page.tab.is_closed() and not page.crashed:
                return page.tab
            old, crashed = page.tab, page.crashed
            tab = await self.open_tab(page.name, max(0.0, deadline - time.monotonic()))
            if browser.state != BrowserState.UP or browser is not self.browser:
                spawn(close_quietly(tab, page.name), about=f"closing a tab of page {page.name} opened as the browser went")
                continue  # the browser went while the tab opened: wait for the next one
            page.set_tab(tab)
            if crashed:
                page.mark_reopened(PAGE_CRASHED, url_of(old))
            spawn(close_quietly(old, page.name), about=f"closing the old tab of page {page.name}")

    async def open_tab(self, page_id: str, wait_s: float) -> Page:
        """A new tab once the browser takes calls; when it goes while the tab
        opens (a relaunch), the next browser is waited for, within `wait_s`:
        503 past it, 502 only when a browser that is up fails the tab."""
        deadline = time.monotonic() + wait_s
        while True:
            browser = await self.wait_for_browser(page_id, max(0.0, deadline - time.monotonic()))
            try:
                return await new_tab(browser, page_id)
            except TabLost:
                if browser.state == BrowserState.UP or time.monotonic() >= deadline:
                    raise


registry = PageRegistry()
