"""In-memory counters the waker reads: requests in flight and the last client
activity, plus the jobs app's counts through a hook."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass
class Tracker:
    requests_in_flight: int = 0
    last_activity_at: float = 0.0  # epoch seconds; 0 until the first request
    started_at: float = 0.0

    def touch(self) -> None:
        self.last_activity_at = time.time()

    def idle_seconds(self, now: float | None = None) -> float:
        now = now or time.time()
        return max(0.0, now - (self.last_activity_at or self.started_at or now))


tracker = Tracker(started_at=time.time())

# Set by the jobs app: answers (jobs in flight, webhook jobs waiting to be
# delivered). This app knows nothing of jobs; without the hook both are 0.
# The jobs app should also call `tracker.touch()` when a job stops counting
# (a polling job ends, a webhook job is delivered or given up), so the idle
# clock starts then.
job_counts: Callable[[], Awaitable[tuple[int, int]]] | None = None


async def current_job_counts() -> tuple[int, int]:
    if job_counts is None:
        return 0, 0
    return await job_counts()
