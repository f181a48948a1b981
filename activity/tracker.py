"""In-memory counters the waker reads: requests in flight and the last client
activity. The jobs app calls `tracker.touch()` when a job stops counting (a
polling job ends, a webhook job is delivered or given up), so the idle clock
starts then; its counts reach the activity route through the URL
configuration (`ActivityView.job_counts`)."""

from __future__ import annotations

import time
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
