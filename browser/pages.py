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

from browser.line import PageLine, Turn
from browser.tabs import url_of
from core import events, metrics
from core.errors import (
    InvalidPageId,
    LeaseRequired,
    PageBusy,
    PageNotOpen,
)
from core.events import Event
from core.routes import RESERVED_PAGE_IDS  # first path segments the API router uses; a page cannot take them

if TYPE_CHECKING:
    from playwright.async_api import Page


log = logging.getLogger("penelope.pages")

PAGE_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAIN_PAGE = "main"



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
    # The page's one line: who holds it, and the plain calls and queued jobs
    # that wait for it, in order (browser/line.py).
    lock: PageLine = field(default_factory=PageLine)
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
    # When a call or a job last let it go (time.monotonic()): idle pool pages close.
    last_used: float = field(default_factory=time.monotonic)
    # Told when the page is let go or its lease released (browser/pool.py hands it to `any`).
    on_free: Callable[[ManagedPage], None] | None = None
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
        if self.on_free is not None and not self.lock.locked():
            self.on_free(self)
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
        if not self.lock.take_now():
            raise PageBusy(f"Page {self.name} is not idle: a call is running on it.", self.name)
        claim = self._claim(lease_id, job_id)
        self.job_id = job_id
        return claim

    def join_queue(self, lease_id: str | None, job_id: str, priority: int) -> Turn:
        """A queued job's place in the page's line, taken now. A lease it
        waits under stays alive meanwhile, as under a running call."""
        lease = self.check_lease(lease_id)
        if lease is not None:
            lease.active_calls += 1
        turn = self.lock.join(priority=priority, job_id=job_id)
        turn.lease = lease
        return turn

    def leave_queue(self, turn: Turn) -> None:
        """The queued job gives its place up (its time ran out, a cancel, a
        stop); a page handed to it just now goes to the next in line."""
        self._lease_done_waiting(turn)
        self.lock.leave(turn)

    def claim_turn(self, turn: Turn, lease_id: str | None) -> Claim:
        """The queued job's claim, once the page was handed to it; refused
        (and the page passed on) when its lease is gone or the page closed."""
        self._lease_done_waiting(turn)
        claim = self._claim(lease_id, turn.job_id)
        self.job_id = turn.job_id
        return claim

    def _lease_done_waiting(self, turn: Turn) -> None:
        lease, turn.lease = turn.lease, None
        if lease is not None:
            lease.active_calls -= 1
            if lease.active_calls == 0:
                lease.expires_at = time.monotonic() + lease.ttl

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
        self.last_used = time.monotonic()
        events.publish(Event.PAGE_IDLE, page_id=self.name, job_id=claim.job_id)
        if self.on_free is not None and not self.lock.locked():
            self.on_free(self)

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
