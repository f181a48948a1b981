"""`any`: a call or a job that runs on whichever page is free.

It takes the first open page that is idle (nobody holds it or waits for it)
and unleased, or opens a new one (`pool-1`, `pool-2`, ...) while fewer than
MAX_PAGES are open. When none is free, a queued job (or a plain call within
its PAGE_WAIT_S) waits in one line for the whole worker, and the first page
that frees with nobody in its own line is handed to it. Pool pages idle for
POOL_PAGE_IDLE_S are closed; leased pages are never picked.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Protocol

from django.conf import settings

from browser.line import AnyLine, Turn
from browser.pages import Claim, ManagedPage
from core.errors import DomainError, TooManyPages


class Pages(Protocol):
    """What the pool needs of the page registry (browser/registry.py)."""

    pages: dict[str, ManagedPage]

    async def open(self, page_id: str) -> ManagedPage: ...

    async def close(self, page_id: str, lease_id: str | None) -> None: ...

log = logging.getLogger("penelope.pages")

POOL_PREFIX = "pool-"


class Pool:
    def __init__(self, registry: Pages) -> None:
        self.registry = registry
        self.line = AnyLine()

    @staticmethod
    def is_free(page: ManagedPage) -> bool:
        """Open, and nobody holds it, waits for it or leases it."""
        return not page.opening and not page.closed and not page.busy and not len(page.lock) and page.current_lease() is None

    def free_page(self) -> ManagedPage | None:
        """The first free open page."""
        return next((page for page in self.registry.pages.values() if self.is_free(page)), None)

    async def claim_now(self, job_id: str | None) -> Claim | None:
        """A claim on a free page, on a pool page opened for it, or None when
        every page is busy or leased and MAX_PAGES are open."""
        while True:
            page = self.free_page()
            if page is not None and page.lock.take_now():
                return self._claimed(page, job_id)
            if len(self.registry.pages) >= settings.MAX_PAGES:
                return None
            try:
                page = await self.registry.open(self._next_name())
            except TooManyPages:
                return None  # another opener took the last place meanwhile
            if page.lock.take_now():
                return self._claimed(page, job_id)
            # Someone else took the new page first: look again.

    def _next_name(self) -> str:
        taken = set(self.registry.pages)
        return next(f"{POOL_PREFIX}{n}" for n in itertools.count(1) if f"{POOL_PREFIX}{n}" not in taken)

    def _claimed(self, page: ManagedPage, job_id: str | None) -> Claim:
        claim = page._claim(None, job_id)
        if job_id is not None:
            page.job_id = job_id
        return claim

    def join(self, priority: int, job_id: str | None) -> Turn:
        return self.line.join(priority=priority, job_id=job_id)

    def claim_turn(self, turn: Turn, job_id: str | None) -> Claim:
        """The claim on the page handed to the turn (it is taken already)."""
        return self._claimed(turn.future.result(), job_id)

    def leave(self, turn: Turn) -> None:
        """A waiter gives its place up; a page handed to it just now goes on."""
        if turn.handed:
            page = turn.future.result()
            page.lock.release()
            self.page_freed(page)
            return
        self.line.remove(turn)

    def page_freed(self, page: ManagedPage) -> None:
        """A page was let go (or its lease released): hand it to the first
        `any` waiter when nobody waits for it by name and it is unleased."""
        if not len(self.line) or page.closed or page.opening or page.current_lease() is not None:
            return
        if page.lock.take_now():
            if not self.line.hand(page):
                page.lock.release()

    async def close_idle(self) -> int:
        """Close the pool pages idle for POOL_PAGE_IDLE_S; answers how many."""
        cutoff = time.monotonic() - settings.POOL_PAGE_IDLE_S
        closed = 0
        for name, page in list(self.registry.pages.items()):
            if name.startswith(POOL_PREFIX) and self.is_free(page) and page.last_used <= cutoff:
                try:
                    await self.registry.close(name, None)
                except DomainError as refused:  # taken or leased meanwhile
                    log.debug("pool page %s stays open: %s", name, refused.message)
                    continue
                closed += 1
        return closed
