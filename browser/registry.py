"""The open pages by name, and what the browser tells of its stops and
relaunches: every page outlives its tab (browser/pages.py)."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import TYPE_CHECKING, Any

from django.conf import settings

from browser.broker import Broker
from browser.pages import MAIN_PAGE, PAGE_CRASHED, Claim, Driver, ManagedPage, validate_page_id
from browser.runner import BrowserState, BrowserUnavailable, Cause
from browser.tabs import close_quietly, new_tab, url_of
from core.errors import BrowserNotRunning, PageAlreadyOpen, PageNotOpen, PageStaysOpen, TabLost, TooManyPages
from core.events import Bus
from core.runtime import Tasks, runtime_of

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

    from browser.runner import Browser

log = logging.getLogger("penelope.pages")


class PageRegistry:
    """The open pages by name, at most MAX_PAGES of them; what the browser
    tells of its stops and relaunches (browser.runner.BrowserListener)."""

    def __init__(self, bus: Bus | None = None, tasks: Tasks | None = None) -> None:
        self.bus = bus  # where the pages' changes are published
        self.tasks = tasks or Tasks()
        self.browser: Browser | None = None
        self.pages: dict[str, ManagedPage] = {}
        # Tabs open outside the pages, by target id: those CDP clients opened
        # (cdp/bridge.py). They count against MAX_PAGES as pages do.
        self.foreign_tabs: set[str] = set()
        self.broker = Broker(self)
        # One memory purge of these pages at a time (browser/purge.py).
        self.purging = asyncio.Lock()
        # The browser contexts whose trace a debug call records now (plugins/debug.py).
        self.tracing: weakref.WeakSet[BrowserContext] = weakref.WeakSet()

    def attach(self, browser: Browser, first_tab: Page) -> None:
        self.browser = browser
        browser.listener = self
        self.pages = {MAIN_PAGE: ManagedPage(MAIN_PAGE, first_tab, bus=self.bus)}

    def detach(self) -> None:
        pages, self.pages = list(self.pages.values()), {}
        self.broker.detached(pages)
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
                self.tasks.spawn(close_quietly(tab, name), about=f"closing the tab of page {name}, closed meanwhile")
                continue
            page.set_tab(tab)
            page.mark_reopened(cause.value, page.lost_url)
            page.lost_url = ""
        # An opening for `any` may have failed while the browser was down: its waiters get it now.
        self.broker.rebalance()

    def idle(self) -> bool:
        return not any(page.busy or page.waiting or self.broker.driven(page) for page in self.pages.values())

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
        if self.room() <= 0:
            raise TooManyPages(
                f"All {settings.MAX_PAGES} pages are open (MAX_PAGES); close one first.", page_id
            )
        if self.browser is None:
            raise BrowserNotRunning("The browser is not running.", page_id)
        page = self.reserve(page_id)
        try:
            await self.open_tab_of(page)
        except BaseException:
            self.drop(page)
            raise
        self.broker.opened(page)  # a new page is free: a waiter on `any` may take it
        return page

    def room(self) -> int:
        """How many more tabs MAX_PAGES allows now: pages and CDP clients' tabs count."""
        return settings.MAX_PAGES - len(self.pages) - len(self.foreign_tabs)

    def hold_tab(self, target_id: str) -> None:
        self.foreign_tabs.add(target_id)

    def free_tab(self, target_id: str) -> None:
        if target_id in self.foreign_tabs:
            self.foreign_tabs.discard(target_id)
            self.broker.rebalance()

    def reserve(self, page_id: str) -> ManagedPage:
        """The page under its name before its tab exists: the name taken
        before any await, so two openers cannot both pass, and the page held
        by its opening (reported to the broker), so no call runs on it and no
        recycle begins under it."""
        page = ManagedPage(page_id, bus=self.bus)
        self.pages[page_id] = page
        self.broker.opening(page)
        return page

    async def open_tab_of(self, page: ManagedPage) -> None:
        page.set_tab(await self.open_tab(page.name, settings.PAGE_WAIT_S))

    def drop(self, page: ManagedPage) -> None:
        """A reserved page whose tab did not open is forgotten; whoever
        already waits for it by name is answered PageNotOpen, and its room
        goes to the waiters on `any` (the broker's `closed`)."""
        if self.pages.get(page.name) is page:
            del self.pages[page.name]
        self.broker.closed(page)

    async def close(self, page_id: str, lease_id: str | None) -> None:
        page = self.get(page_id)
        if page_id == MAIN_PAGE:
            raise PageStaysOpen("Page main is the worker's default page and stays open.", page_id)
        page.check_lease(lease_id)
        if page.opening or page.held or len(page.line):
            raise page.busy_error()
        del self.pages[page_id]
        self.broker.closed(page)
        await close_quietly(page.tab, page.name)

    async def reopen_tab(self, page: ManagedPage) -> None:
        """Close the page's tab and open a new one under the same name: for a
        cancelled job whose plugin would not stop (its browser calls on the old
        tab fail from now on). When no tab can be opened now, the page is left
        without one: its next call opens it (`ensure_tab`)."""
        old, page.tab = page.tab, None
        page.on_tab_lost = None  # the plugin that would not stop is no call of the page's any more
        page.tab_generation += 1
        self.tasks.spawn(close_quietly(old, page.name), about=f"closing the old tab of page {page.name}")
        try:
            tab = await self.open_tab(page.name, settings.PAGE_WAIT_S)
        except (BrowserNotRunning, TabLost) as error:
            log.warning("page %s: no new tab after a cancel (%s); its next call opens one", page.name, error.message)
            return
        if page.tab is None and not page.closed:
            page.set_tab(tab)
        else:
            self.tasks.spawn(close_quietly(tab, page.name), about=f"closing a spare tab of page {page.name}")

    async def ensure_tab(self, hold: Claim | Driver, wait_s: float) -> Page:
        """The tab of the page `hold` holds (a claim, or a driver hold: the
        broker's, browser/broker.py), for its call: once the browser takes
        calls (a relaunch waited for up to `wait_s`, else 503), and opened
        anew if its renderer crashed, it went with the browser, or an action
        closed it. One new tab at a time per page: a holder that finds one
        opening awaits it (two drivers share a page). PageNotOpen when the
        hold holds nothing (its page closed). Nothing is awaited between the
        tab's check and the answer, so the caller's read of
        `tab_generation` right after belongs to this tab."""
        page = hold.page
        deadline = time.monotonic() + wait_s
        while True:
            browser = await self.wait_for_browser(page.name, max(0.0, deadline - time.monotonic()))
            if not self.broker.holds(hold):  # after the wait: a relaunch waited for may have closed its page
                raise PageNotOpen(f"Page {page.name} is not open, or its hold was let go.", page.name)
            if page.tab is not None and not page.tab.is_closed() and not page.crashed:
                return page.tab
            if page.tab_opening is not None:  # another holder opens it: its tab is ours too
                await asyncio.shield(page.tab_opening)
                continue
            page.tab_opening = asyncio.get_running_loop().create_future()
            try:
                await self._reopen(page, browser, deadline)
            finally:
                opening, page.tab_opening = page.tab_opening, None
                opening.set_result(None)

    async def _reopen(self, page: ManagedPage, browser: Browser, deadline: float) -> None:
        """A new tab for the page, unless the browser went while it opened."""
        old, crashed = page.tab, page.crashed
        tab = await self.open_tab(page.name, max(0.0, deadline - time.monotonic()))
        if browser.state != BrowserState.UP or browser is not self.browser:
            self.tasks.spawn(close_quietly(tab, page.name), about=f"closing a tab of page {page.name} opened as the browser went")
            return  # the browser went while the tab opened: the caller waits for the next one
        if page.closed or self.pages.get(page.name) is not page:  # closed while its tab opened (a driven page may be)
            self.tasks.spawn(close_quietly(tab, page.name), about=f"closing the tab of page {page.name}, closed meanwhile")
            return  # the caller's hold holds nothing now: PageNotOpen
        page.set_tab(tab)
        if crashed:
            page.mark_reopened(PAGE_CRASHED, url_of(old))
        self.tasks.spawn(close_quietly(old, page.name), about=f"closing the old tab of page {page.name}")

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


def pages_of(request: Any) -> PageRegistry:
    """The pages of the worker that serves `request` (core/runtime.py)."""
    return runtime_of(request).pages
