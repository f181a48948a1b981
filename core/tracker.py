"""In-memory counters the waker reads: requests in flight and the last client
activity. The runtime owns one (worker/runtime.py); the jobs app calls its
`touch()` when a job stops counting (a polling job ends, a webhook job is
delivered or given up), so the idle clock starts then; its counts reach the
activity route through the URL configuration (`ActivityView.job_counts`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.conf import settings

from core.awake import must_stay_awake, read_next_wake, write_next_wake


@dataclass
class Tracker:
    requests_in_flight: int = 0
    last_activity_at: float = 0.0  # epoch seconds; 0 until the first request
    started_at: float = field(default_factory=time.time)
    # Epoch seconds of the next instant the worker has work of its own to
    # start (a schedule's fire), None when it has none: set by the schedules.
    next_wake_at: float | None = None

    def touch(self) -> None:
        self.last_activity_at = time.time()

    def idle_seconds(self, now: float | None = None) -> float:
        now = now or time.time()
        return max(0.0, now - (self.last_activity_at or self.started_at or now))

    def idle_now(self, *, jobs_in_flight: int, webhooks_pending: int, now: float) -> float:
        """The activity route's `idle_seconds`: 0 while work is in flight,
        however long ago it began, else to the millisecond."""
        if self.requests_in_flight or jobs_in_flight or webhooks_pending:
            return 0.0
        return round(self.idle_seconds(now), 3)

    def stays_awake(self, *, jobs_in_flight: int, webhooks_pending: int, idle_timeout_s: float, now: float) -> bool:
        """The worker's stay-awake signal (the activity route's `stay_awake`,
        the metrics' `penelope_stay_awake`): core/awake.py's rule, the waker's,
        on the idle time the activity route shows."""
        return must_stay_awake(
            requests_in_flight=self.requests_in_flight,
            jobs_in_flight=jobs_in_flight,
            webhooks_pending=webhooks_pending,
            idle_seconds=self.idle_now(jobs_in_flight=jobs_in_flight, webhooks_pending=webhooks_pending, now=now),
            idle_timeout_s=idle_timeout_s,
            next_wake_in_s=self.next_wake_at - now if self.next_wake_at is not None else None,
            wake_lead_s=settings.WAKE_LEAD_S,
        )

    def wake_at(self, at: float | None) -> None:
        """The worker's next wake changed: shown by the activity route and
        kept in the store, where its supervisor reads it while it sleeps."""
        self.next_wake_at = at
        # Compared with the store's copy, not with memory: a fresh worker, or
        # `manage.py schedules` beside it, may have left another instant there.
        at = round(at, 3) if at is not None else None
        if read_next_wake(settings.STORE_DIR) != at:
            write_next_wake(settings.STORE_DIR, at)
