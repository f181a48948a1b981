"""Named pages (browser tabs), their one-at-a-time lock, their lines of
waiters and their leases.

Everything here lives in memory and on the event loop. A page knows a job only
as the id that holds it. Each change a client can see (busy, idle, leased,
released, crashed) is published on the event bus (core/events.py).

A page outlives its tab: a tab whose renderer crashed, or that went with a
browser that stopped, is replaced under the same name before the page's next
call, and the page's lease, waiters and name are kept. The call in hand when
the tab went answers 502 (`run_claimed` in plugins/running.py compares the
page's `tab_generation` before and after it).

A line of waiters (`Line`) is kept for each page, and one for `any`. A
waiter is anyone who takes a page through the broker (browser/broker.py): a
plain call within its PAGE_WAIT_S, a queued job, a retry, a job resumed
after a restart. The line orders them by priority (highest first), then
arrival; plain calls wait at priority 0. The broker hands a page to the
first waiter still waiting, by setting its future to the page.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from browser.tabs import url_of
from core import metrics
from core.errors import InvalidPageId, LeaseRequired, PageBusy
from core.events import Bus, Event
from core.routes import RESERVED_PAGE_IDS  # first path segments the API router uses; a page cannot take them

if TYPE_CHECKING:
    from playwright.async_api import Page


log = logging.getLogger("penelope.pages")

PAGE_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAIN_PAGE = "main"


@dataclass(eq=False)
class Waiter:
    """One place in a line. Its future is set to the page once the page is
    handed to it (the page is then held for it), or to the error that ends
    its wait (its page closed); it is cancelled when the waiter leaves."""

    target: str  # a page's name, or "any"
    rank: tuple[int, int]  # (-priority, arrival)
    future: asyncio.Future[Any]
    job_id: str | None = None
    lease_id: str | None = None
    lease: Any = None  # the page's Lease (below) it waits under, kept alive meanwhile

    def __lt__(self, other: Waiter) -> bool:
        return self.rank < other.rank

    @property
    def waiting(self) -> bool:
        return not self.future.done()

    @property
    def handed(self) -> bool:
        """A page was handed to it (and it holds the page until it claims or leaves)."""
        return self.future.done() and not self.future.cancelled() and self.future.exception() is None


@dataclass
class Line:
    """Waiters in order: highest priority first, then arrival."""

    waiters: list[Waiter] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.waiters)

    def push(self, waiter: Waiter) -> None:
        heapq.heappush(self.waiters, waiter)

    def pop(self) -> Waiter | None:
        """The first waiter still waiting, taken out of the line."""
        while self.waiters:
            waiter = heapq.heappop(self.waiters)
            if waiter.waiting:
                return waiter
        return None

    def remove(self, waiter: Waiter) -> None:
        try:
            self.waiters.remove(waiter)
        except ValueError:
            return
        heapq.heapify(self.waiters)

    def position(self, job_id: str) -> int | None:
        """A job's place in the line, from 1 (the next to take a page), or None."""
        for place, waiter in enumerate(sorted(self.waiters), start=1):
            if waiter.job_id == job_id:
                return place
        return None

    def jobs_waiting(self) -> int:
        return sum(1 for waiter in self.waiters if waiter.job_id is not None)

    def calls_waiting(self) -> int:
        return sum(1 for waiter in self.waiters if waiter.job_id is None)


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
    under it runs; its TTL restarts when the last such call ends. The broker
    keeps it: it takes, renews, releases and expires it (a timer at its end)."""

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


@dataclass(eq=False)
class Driver:
    """A driver hold: a CDP client's connection, or a person's input on the
    live view, driving the page's tab under its lease (or on a page nobody
    leases). Several drivers may share a page; a driver and a claim never
    hold it at once (the broker's invariant 7)."""

    page: ManagedPage
    lease: Lease | None
    kind: str  # who drives, as the 409 names it: "a CDP client", "live control"
    leaving: bool = False  # its connection ended: it lets go once it has undone what it set
    released: bool = False


PAGE_CRASHED = "page_crashed"  # a `reopened` cause besides the browser's (browser.runner.Cause)


@dataclass
class ManagedPage:
    name: str
    tab: Page | None = None
    # Held by one caller at a time (a claim, a waiter it was handed to, its
    # opening); the plain calls and queued jobs that wait for it stand in its
    # line. `held`, `opening`, `closed` and `lease` are the broker's to change
    # (browser/broker.py), which is told of every opening and closing; the
    # driver holds (CDP clients, live control) are kept in the broker.
    held: bool = False
    line: Line = field(default_factory=Line)
    job_id: str | None = None
    lease: Lease | None = None
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
    # Ends the call in hand when its tab is lost (set by plugins.running.run_claimed).
    on_tab_lost: Callable[[], None] | None = None
    # When a call or a job last let it go (time.monotonic()): idle pool pages close.
    last_used: float = field(default_factory=time.monotonic)
    # A new tab being opened for it (`ensure_tab`): the other holders await it
    # rather than open a second one (browser/registry.py).
    tab_opening: asyncio.Future | None = field(default=None, repr=False)
    # The last replacement of the tab, shown in the page's state:
    # {"cause", "at", "lost_url"}; a client compares `at` with its last call.
    reopened: dict | None = None
    # Where its changes are published: its worker's bus (None: a page outside
    # a worker, whose changes nobody hears).
    bus: Bus | None = field(default=None, repr=False)

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
        self.publish(Event.PAGE_CRASHED, job_id=self.job_id, detail={"url": url_of(tab)})

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

    def publish(self, event: Event, *, job_id: str | None, detail: dict | None = None) -> None:
        """Publish one of the page's changes on its worker's bus."""
        if self.bus is not None:
            self.bus.publish(event, page_id=self.name, job_id=job_id, detail=detail)

    def check_lease(self, lease_id: str | None) -> Lease | None:
        """The lease a call runs under, or 423 when the call may not run. A
        read: the lease is taken, released and expired by the broker only
        (browser/broker.py), so nothing here changes or publishes anything."""
        lease = self.lease
        if lease is None:
            if lease_id:
                raise LeaseRequired("The lease in X-Lease is unknown or expired.", self.name)
            return None
        if not lease_id:
            raise LeaseRequired(f"Page {self.name} is leased; send its lease in X-Lease.", self.name)
        if not secrets.compare_digest(lease_id.encode(), lease.id.encode()):
            raise LeaseRequired(f"The lease in X-Lease does not hold page {self.name}.", self.name)
        return lease

    # --- who holds it ---------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.held

    @property
    def waiting(self) -> int:
        """Plain calls waiting in its line (queued jobs are counted apart)."""
        return self.line.calls_waiting()

    def busy_error(self) -> PageBusy:
        if self.job_id:
            return PageBusy(f"Page {self.name} is busy: job {self.job_id} runs on it.", self.name)
        return PageBusy(f"Page {self.name} is busy.", self.name)

    def state(self) -> dict:
        """What `GET /pages` shows: a read, it changes and publishes nothing."""
        lease = self.lease
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
