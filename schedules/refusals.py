"""How a schedule's refused fires reach the log: one line per schedule at
most every SCHEDULE_REFUSAL_LOG_S, with the count of refusals since its
last line.

A schedule that fires every second against a full MAX_JOBS is refused every
second; a line for each buried the log (300 such schedules wrote 15,390
WARNING lines in 58 s). Every refusal is still counted where it can be
read: on the row (`refused`, `last_error`, `last_refused_at`) and in
`penelope_schedule_refusals_total`. The log only says that it goes on, and
how often.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("penelope.schedules")


@dataclass
class Tally:
    """One schedule's refusals since its last line."""

    name: str
    logged_at: float  # the clock's time of its last line
    unlogged: int = 0
    last_error: str = ""


class RefusalLog:
    """The refusals of each schedule, written down at most once a window.

    The first refusal of a schedule (or the first after a quiet window) is
    logged at once; the next ones in the window are counted, and logged as
    one line by the first refusal after it, or by `flush`, which the loop
    calls each time it wakes, so a count is never left unsaid for long.
    A schedule quiet for a whole window is forgotten: this holds at most the
    schedules refused in the last window.
    """

    def __init__(self, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self.tallies: dict[str, Tally] = {}

    def refused(self, *, schedule_id: str, name: str, error: str) -> None:
        now = self.clock()
        tally = self.tallies.get(schedule_id)
        if tally is None:
            self.write(name, 1, error, None)
            self.tallies[schedule_id] = Tally(name=name, logged_at=now)
        elif now - tally.logged_at >= self.every_s:
            self.write(name, tally.unlogged + 1, error, now - tally.logged_at)
            self.tallies[schedule_id] = Tally(name=name, logged_at=now)
        else:
            tally.unlogged += 1
            tally.last_error = error

    def flush(self) -> None:
        """Log the counts whose window has passed; forget the quiet schedules."""
        now = self.clock()
        for schedule_id, tally in list(self.tallies.items()):
            if now - tally.logged_at < self.every_s:
                continue
            if tally.unlogged:
                self.write(tally.name, tally.unlogged, tally.last_error, now - tally.logged_at)
                self.tallies[schedule_id] = Tally(name=tally.name, logged_at=now)
            else:
                del self.tallies[schedule_id]

    @staticmethod
    def write(name: str, count: int, last_error: str, span_s: float | None) -> None:
        if span_s is None:
            log.warning("schedule %s: a fire was refused: %s", name, last_error)
        else:
            fires = "fire" if count == 1 else "fires"
            log.warning("schedule %s: %d %s refused in the last %.0f s; the last: %s", name, count, fires, span_s, last_error)
