"""A page's one line: who holds the page, and who waits for it, in order.

Plain calls waiting their PAGE_WAIT_S and queued jobs wait in the same line,
so neither overtakes the other: the holder's release hands the page straight
to the first in line (no timer, no polling). A higher priority goes first;
equal priorities keep their arrival order. Plain calls wait at priority 0.

It answers like `asyncio.Lock` (`locked`, `acquire`, `release`) for the code
that only needs a lock, and adds priorities, positions and a look at who
waits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class Turn:
    """One waiter: ordered by priority (highest first), then arrival. Its
    future is set when the page is handed to it."""

    rank: tuple[int, int]
    future: asyncio.Future = field(compare=False)
    job_id: str | None = field(default=None, compare=False)
    lease: Any = field(default=None, compare=False)  # the lease a queued job waits under

    @property
    def handed(self) -> bool:
        return self.future.done() and not self.future.cancelled()


class Line:
    """Turns in order: highest priority first, then arrival."""

    def __init__(self) -> None:
        self._turns: list[Turn] = []
        self._arrivals = itertools.count()

    def __len__(self) -> int:
        """How many wait (cancelled waiters leave at once)."""
        return len(self._turns)

    def _new_turn(self, priority: int, job_id: str | None) -> Turn:
        return Turn((-priority, next(self._arrivals)), asyncio.get_running_loop().create_future(), job_id)

    def _next_waiting(self) -> Turn | None:
        """The first turn still waiting, taken out of the line."""
        while self._turns:
            turn = heapq.heappop(self._turns)
            if not turn.future.done():
                return turn
        return None

    def remove(self, turn: Turn) -> None:
        turn.future.cancel()
        try:
            self._turns.remove(turn)
        except ValueError:
            return
        heapq.heapify(self._turns)

    def position(self, job_id: str) -> int | None:
        """The job's place in line, from 1 (the next to take a page), or None."""
        for place, turn in enumerate(sorted(self._turns), start=1):
            if turn.job_id == job_id:
                return place
        return None

    def jobs_waiting(self) -> int:
        return sum(1 for turn in self._turns if turn.job_id is not None)


class PageLine(Line):
    def __init__(self) -> None:
        super().__init__()
        self.held = False

    def locked(self) -> bool:
        return self.held

    def take_now(self) -> bool:
        """Take the page if it is free and nobody waits; never suspends."""
        if self.held or self._turns:
            return False
        self.held = True
        return True

    def join(self, *, priority: int = 0, job_id: str | None = None) -> Turn:
        """Take a place in line now (the page is handed at once when it is
        free and nobody waits); the turn's future is set when it is its."""
        turn = self._new_turn(priority, job_id)
        if self.take_now():
            turn.future.set_result(None)
        else:
            heapq.heappush(self._turns, turn)
        return turn

    def leave(self, turn: Turn) -> None:
        """A waiter gives its place up; one handed the page already passes it on."""
        if turn.handed:
            self.release()
        else:
            self.remove(turn)

    async def acquire(self, *, priority: int = 0, job_id: str | None = None) -> bool:
        """Wait for the page in line. A waiter cancelled (its client gone, its
        time up) leaves the line; one cancelled just after the page was handed
        to it passes the page on."""
        if self.take_now():
            return True
        turn = self.join(priority=priority, job_id=job_id)
        try:
            await asyncio.shield(turn.future)
        except asyncio.CancelledError:
            self.leave(turn)
            raise
        return True

    def release(self) -> None:
        """Hand the page to the first in line, or free it."""
        if not self.held:
            raise RuntimeError("release of a page that is not held")
        turn = self._next_waiting()
        if turn is None:
            self.held = False
        else:
            turn.future.set_result(None)  # the page stays held: it is the turn's now


class AnyLine(Line):
    """The calls and jobs sent to `any`: each waits for whichever page frees
    first (a page's own line goes first on that page). The page is handed
    to a turn already taken for it (its future's result)."""

    def join(self, *, priority: int = 0, job_id: str | None = None) -> Turn:
        turn = self._new_turn(priority, job_id)
        heapq.heappush(self._turns, turn)
        return turn

    def hand(self, page: Any) -> bool:
        """Give `page` (taken for it) to the first in line; False when nobody waits."""
        turn = self._next_waiting()
        if turn is None:
            return False
        turn.future.set_result(page)
        return True
