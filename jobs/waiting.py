"""What answers a poll without a read of the store: the recent ends, and
the long-polls (`GET /api/v1/jobs/{job_id}?wait=S`), which answer as soon as
the job ends. Each waiter is a future keyed by its job, which the job runner sets
when it stores the job's end (`wake`), so a waiter costs nothing while it
waits, and nothing at all once its client has gone (its request is
cancelled, and the future with it)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Iterator

from django.conf import settings

from core.auth import FULL
from core.caps import has_room, kept_for_full_key
from core.errors import WaitersFull
from jobs.models import Job

MAX_WAIT_S = 60.0


class Waiters:
    def __init__(self) -> None:
        self.by_job: dict[str, set[asyncio.Future]] = {}
        self.count = 0

    @contextlib.contextmanager
    def waiting(self, job_id: str, role: str = FULL) -> Iterator[asyncio.Future]:
        """A future set when the job ends; registered before the caller reads
        the job, so an end between that read and the wait is not missed.
        WaitersFull past MAX_WAITERS, or for a read key past its part of it
        (core/caps.py). Counted and taken in one step: nothing is awaited
        between the count and the place."""
        if not has_room(role, self.count, settings.MAX_WAITERS):
            raise WaitersFull(
                f"{self.count} long-polls are waiting already "
                f"(MAX_WAITERS{kept_for_full_key(role, settings.MAX_WAITERS)}); poll without wait, or try again."
            )
        ended = asyncio.get_running_loop().create_future()
        self.by_job.setdefault(job_id, set()).add(ended)
        self.count += 1
        try:
            yield ended
        finally:
            self.count -= 1
            ended.cancel()
            same_job = self.by_job.get(job_id)
            if same_job is not None:
                same_job.discard(ended)
                if not same_job:
                    del self.by_job[job_id]

    def wake(self, job_id: str) -> None:
        """The job's end is stored: every long-poll on it answers now."""
        for ended in self.by_job.pop(job_id, ()):
            if not ended.done():
                ended.set_result(None)


class RecentEnds:
    """The last polling jobs that ended on this worker, as their ends stored
    them, so that the poll (or long-poll) that usually follows an end at once
    is answered without a read. Webhook jobs are not kept: another process's
    deliverer may delete one. Bounded by count, as results may be large."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self.jobs: collections.OrderedDict[str, Job] = collections.OrderedDict()

    def add(self, job: Job) -> None:
        if job.mode != Job.Mode.POLL:
            return
        self.jobs[job.id] = job
        if len(self.jobs) > self.size:
            self.jobs.popitem(last=False)

    def get(self, job_id: str, now: float) -> Job | None:
        job = self.jobs.get(job_id)
        if job is not None and job.expires_at <= now:
            del self.jobs[job_id]
            return None
        return job

    def forget(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)
