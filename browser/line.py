"""A line of waiters for a page, or for `any`: who is next, in order.

A waiter is anyone who takes a page through the broker (browser/broker.py):
a plain call within its PAGE_WAIT_S, a queued job, a retry, a job resumed
after a restart. The line orders them by priority (highest first), then
arrival; plain calls wait at priority 0. The broker hands a page to the
first waiter still waiting, by setting its future to the page.
"""

from __future__ import annotations

import asyncio
import heapq
from dataclasses import dataclass, field
from typing import Any


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
    lease: Any = None  # the page's Lease (browser/pages.py) it waits under, kept alive meanwhile

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
