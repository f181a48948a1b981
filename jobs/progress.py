"""A running job's progress: the plugin's last report, kept in memory and
passed on to the event bus at most every PROGRESS_EVERY_S.

A plugin may report as often as it likes (each report costs a dict and, at
most once per interval, a timer): the newest report always reaches the bus,
the ones in between are folded into it. Polls read the newest report at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

# About ten events a second per job, whatever the plugin reports.
PROGRESS_EVERY_S = 0.1


class ProgressRelay:
    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send
        self.last: dict[str, Any] | None = None
        self._sent_at = float("-inf")  # time.monotonic() of the last send
        self._timer: asyncio.TimerHandle | None = None

    def report(self, note: dict[str, Any]) -> None:
        """A report from the plugin (the context validated it)."""
        self.last = note
        if self._timer is not None:
            return  # a send is already due; it takes this report
        wait = self._sent_at + PROGRESS_EVERY_S - time.monotonic()
        if wait <= 0:
            self._flush()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        self._sent_at = time.monotonic()
        if self.last is not None:
            self.send(self.last)

    def close(self) -> None:
        """The job ended: its end carries the last report, so nothing more is sent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
