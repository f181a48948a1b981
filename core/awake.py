"""Whether a worker must stay awake: the one rule the waker's `sleepy` policy
and the worker's own stay-awake signal (`stay_awake` in GET /api/v1/activity,
read by KEDA's metrics-api scaler on Kubernetes) both apply, so neither a
waker nor a cluster stops a worker under work.

Pure functions of the activity counts, with no Django, no settings and no
other app: the waker imports this module on its own settings, the worker's
activity view on the worker's."""

from __future__ import annotations


def work_in_flight(*, requests_in_flight: int, jobs_in_flight: int, webhooks_pending: int) -> bool:
    """A request being answered, a job running, or an ended webhook job still
    waiting to be delivered or given up."""
    return bool(requests_in_flight or jobs_in_flight or webhooks_pending)


def must_stay_awake(
    *, requests_in_flight: int, jobs_in_flight: int, webhooks_pending: int, idle_seconds: float, idle_timeout_s: float
) -> bool:
    """Work in flight, or idle for less than `idle_timeout_s`."""
    return (
        work_in_flight(
            requests_in_flight=requests_in_flight, jobs_in_flight=jobs_in_flight, webhooks_pending=webhooks_pending
        )
        or idle_seconds < idle_timeout_s
    )
