"""What the waker keeps of a persona beyond its state, for the console: its
worker's charged memory over the last day, the last activity it read (kept
while the worker sleeps, with its time), when it last woke, and why its last
start failed. All of it in memory: a restarted waker starts it again."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from django.conf import settings

from core.procfs import tree_charged_bytes
from waker.policy import Activity

MINUTE = 60.0
# A day of minutes: the console's charts go back a day.
MEMORY_MINUTES = 24 * 60


@dataclass
class MemoryPoint:
    minute: float  # epoch seconds at the minute's start
    peak: int  # the most charged in that minute, in bytes


class Watch:
    def __init__(self) -> None:
        self.memory: deque[MemoryPoint] = deque(maxlen=MEMORY_MINUTES)
        self.memory_now: int | None = None
        self.memory_read_at: float | None = None
        self.last_activity: Activity | None = None
        self.last_woke_at: float | None = None
        self.start_error: str | None = None
        self.start_error_at: float | None = None
        self._next_sample = 0.0  # monotonic

    def started(self) -> None:
        self.last_woke_at = time.time()
        self.start_error = self.start_error_at = None

    def start_failed(self, error: BaseException) -> None:
        self.start_error = getattr(error, "message", None) or str(error) or error.__class__.__name__
        self.start_error_at = time.time()

    def read(self, activity: Activity) -> None:
        self.last_activity = activity

    async def sample_memory(self, pid: int) -> None:
        """Read the worker's charged memory (its process, its driver, its
        browser), at most every WAKER_MEMORY_EVERY_S."""
        if time.monotonic() < self._next_sample:
            return
        self._next_sample = time.monotonic() + settings.WAKER_MEMORY_EVERY_S
        self.note_memory(await asyncio.to_thread(tree_charged_bytes, pid), time.time())

    def note_memory(self, charged: int, now: float) -> None:
        """One reading of the charged memory: the latest, and its minute's peak
        (a console on Kubernetes notes what each worker's overview says)."""
        self.memory_now, self.memory_read_at = charged, now
        minute = now - now % MINUTE
        if self.memory and self.memory[-1].minute == minute:
            self.memory[-1].peak = max(self.memory[-1].peak, charged)
        else:
            self.memory.append(MemoryPoint(minute, charged))
