"""Reads of the job store: synchronous, one query or a few, no writes.

The worker calls them on its database thread (`on_db_thread`); the commands
and the in-process tests call them as they are.
"""

from __future__ import annotations

from jobs.models import Job

LIST_LIMIT = 50
MAX_LIST_LIMIT = 200


def find_live_job(*, job_id: str, now: float) -> Job | None:
    """The job as the store holds it, or None when it is unknown or past its deadline."""
    job = Job.objects.with_id(job_id)
    if job is None or (job.ended and job.expires_at <= now):
        return None
    return job


def find_held_by_key(*, key: str, now: float) -> Job | None:
    """The held job started with this Idempotency-Key."""
    return Job.objects.held(now).with_key(key).first()


def find_jobs(
    *, now: float, limit: int, state: str | None = None, page_id: str | None = None, plugin: str | None = None,
    schedule_id: str | None = None, after: tuple[float, str] | None = None,
) -> tuple[list[Job], tuple[float, str] | None]:
    """A page of the held jobs, newest accepted first (`JobQuerySet.listed`):
    the jobs, and the cursor of the next page, or None at the end."""
    found = list(Job.objects.held(now).listed(state=state, page_id=page_id, plugin=plugin, schedule_id=schedule_id, after=after)[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    return found, ((found[-1].accepted_at, found[-1].id) if more else None)


def counts() -> tuple[int, int]:
    """(jobs in flight: queued or running, webhook jobs waiting for delivery): for the waker."""
    return Job.objects.live().count(), Job.objects.webhooks_pending().count()


def find_queued() -> list[Job]:
    """The queued jobs, in the order they take their pages."""
    return list(Job.objects.queued())


def held_by_state(now: float) -> dict[str, int]:
    """The jobs held (those that count against MAX_JOBS), by state: the metrics' gauge."""
    return Job.objects.held(now).count_by_state()


def held_job_ids(*, job_ids: set[str], now: float) -> set[str]:
    """Which of `job_ids` the store still holds (queued, running, or holding a
    live result): the others are deleted, and nothing may show them."""
    return set(Job.objects.held(now).filter(id__in=job_ids).values_list("id", flat=True))


def count_held(now: float) -> int:
    return Job.objects.held(now).count()


def seconds_until_a_result_lapses(now: float) -> float | None:
    """How long until the first ended job held against MAX_JOBS passes its
    deadline (None: every held job is queued or running)."""
    first = Job.objects.ended().filter(expires_at__gt=now).order_by("expires_at").values_list("expires_at", flat=True)
    deadline = first.first()
    return None if deadline is None else deadline - now


def seconds_until_next_attempt(now: float) -> float | None:
    """How long until an unclaimed webhook attempt comes due (None: nothing pending)."""
    next_at = Job.objects.next_attempt_at()
    return None if next_at is None else max(0.0, next_at - now)
