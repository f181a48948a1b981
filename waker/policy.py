"""The waker's decisions, as pure functions of what it has read: whether a
running worker is due to stop (`sleepy`) or be recycled (`always`), and how
long to wait before starting a failed `always` worker again."""

from __future__ import annotations

from dataclasses import dataclass

from core.awake import must_stay_awake, work_in_flight
from waker.personas import SLEEPY

# A failed start of an `always` worker is retried after 1, 2, 4, ... seconds, at most this.
MAX_RETRY_S = 60.0


@dataclass(frozen=True)
class Activity:
    """One read of the worker's `GET /api/v1/activity`."""

    requests_in_flight: int
    jobs_in_flight: int
    webhooks_pending: int
    idle_seconds: float
    read_at: float  # epoch seconds
    # The worker's browser as its health says it (`up`, `relaunching`, `failed`…).
    browser_state: str = "up"
    # Epoch seconds of its next schedule's fire, None when it has none.
    next_wake_at: float | None = None
    busy_pages: tuple[str, ...] = ()
    open_pages: tuple[str, ...] = ()

    @property
    def browser_failed(self) -> bool:
        """Every relaunch of its browser failed: the worker is to be started again."""
        return self.browser_state == "failed"

    @property
    def in_flight(self) -> bool:
        return work_in_flight(
            requests_in_flight=self.requests_in_flight,
            jobs_in_flight=self.jobs_in_flight,
            webhooks_pending=self.webhooks_pending,
        )

    def describe(self) -> str:
        return (
            f"requests: {self.requests_in_flight}, jobs running: {self.jobs_in_flight}, "
            f"webhook jobs waiting for delivery: {self.webhooks_pending}"
        )


def stop_due(
    *, mode: str, activity: Activity | None, quiet: bool, running_for: float, idle_timeout_s: float, recycle_s: float,
    wake_lead_s: float = 0.0,
) -> bool:
    """Whether a running worker is to be stopped (`sleepy`) or recycled
    (`always`) now: never while its activity cannot be read, while it has a
    request, a job or a webhook in flight, or while a request through the
    waker is in flight or began since the read (`quiet` False)."""
    if activity is None or activity.in_flight or not quiet:
        return False
    if mode == SLEEPY:
        # The worker's idle clock starts when its process does, before the
        # browser launch: a worker the waker started gets the whole timeout
        # from the moment it answered, so its first client finds it up.
        # The rest is the rule the worker's own stay-awake signal applies.
        return not must_stay_awake(
            requests_in_flight=activity.requests_in_flight,
            jobs_in_flight=activity.jobs_in_flight,
            webhooks_pending=activity.webhooks_pending,
            idle_seconds=min(activity.idle_seconds, running_for),
            idle_timeout_s=idle_timeout_s,
            next_wake_in_s=activity.next_wake_at - activity.read_at if activity.next_wake_at is not None else None,
            wake_lead_s=wake_lead_s,
        )
    return running_for >= recycle_s


def retry_delay(failed_starts: int) -> float:
    """Seconds before the next start of an `always` worker that failed to
    start `failed_starts` times in a row."""
    return min(MAX_RETRY_S, 2.0 ** (failed_starts - 1))
