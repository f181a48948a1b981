"""Whether a worker must stay awake: the one rule the waker's `sleepy` policy
and the worker's own stay-awake signal (`stay_awake` in GET /api/v1/activity,
read by KEDA's metrics-api scaler on Kubernetes) both apply, so neither a
waker nor a cluster stops a worker under work.

Pure functions of the activity counts, with no Django, no settings and no
other app: the waker imports this module on its own settings, the worker's
activity view on the worker's. Beside them, the one file through which a
stopped worker still says when it must be woken: the next instant it has
work of its own to start (a schedule's fire), in its store."""

from __future__ import annotations

import os
from pathlib import Path

# In the worker's store: the epoch seconds of its next wake, absent when it has none.
WAKE_FILE = "next-wake-at"


def work_in_flight(*, requests_in_flight: int, jobs_in_flight: int, webhooks_pending: int) -> bool:
    """A request being answered, a job running, or an ended webhook job still
    waiting to be delivered or given up."""
    return bool(requests_in_flight or jobs_in_flight or webhooks_pending)


def must_stay_awake(
    *, requests_in_flight: int, jobs_in_flight: int, webhooks_pending: int, idle_seconds: float, idle_timeout_s: float,
    next_wake_in_s: float | None = None, wake_lead_s: float = 0.0,
) -> bool:
    """Work in flight, idle for less than `idle_timeout_s`, or work of its own
    due within `wake_lead_s` (a schedule's fire, `next_wake_in_s` from now):
    a worker is not stopped only to be woken again for it."""
    return (
        work_in_flight(
            requests_in_flight=requests_in_flight, jobs_in_flight=jobs_in_flight, webhooks_pending=webhooks_pending
        )
        or idle_seconds < idle_timeout_s
        or wake_due(next_wake_in_s, wake_lead_s)
    )


def wake_due(next_wake_in_s: float | None, wake_lead_s: float) -> bool:
    """Whether work of the worker's own is due within `wake_lead_s` (or overdue)."""
    return next_wake_in_s is not None and next_wake_in_s <= wake_lead_s


def write_next_wake(store: Path, at: float | None) -> None:
    """Record the worker's next wake in its store (None: it has none). The
    file is replaced whole, so a reader sees the old instant or the new."""
    path = Path(store) / WAKE_FILE
    if at is None:
        path.unlink(missing_ok=True)
        return
    fresh = path.with_name(WAKE_FILE + ".new")
    fresh.write_text(f"{at:.3f}\n")
    os.replace(fresh, path)


def read_next_wake(store: Path) -> float | None:
    """The worker's next wake as its store records it; None when it has none
    (or the file cannot be read: a worker that never recorded one)."""
    try:
        return float((Path(store) / WAKE_FILE).read_text())
    except (OSError, ValueError):
        return None
