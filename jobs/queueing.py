"""Jobs that wait for their page (X-Queue-Timeout): the room left in a
page's queue, and one queued job's wait for its turn.

A queued job waits in the page's own line (browser/line.py), beside the
plain calls waiting their PAGE_WAIT_S, so the release of the page hands it
to the next in line at once. The job runner (jobs/runner.py) owns the
queued jobs as it owns the running ones; this module holds what it needs to
decide and to wait.
"""

from __future__ import annotations

import asyncio
import math
import time

from django.conf import settings

from browser.line import Turn
from browser.pages import Claim, ManagedPage
from core.errors import Cancelled, DomainError, QueueFull, QueueTimedOut
from jobs.run import CANCELLED_ERROR, JobRun

# How much each new run time weighs in a page's estimate.
RUN_TIME_WEIGHT = 0.2


class JobQueue:
    def __init__(self) -> None:
        # A page's recent run time per job (seconds), for Retry-After.
        self.run_s: dict[str, float] = {}

    def check_room(self, page: ManagedPage) -> None:
        """QueueFull (429) when QUEUE_MAX jobs wait for the page already."""
        waiting = page.lock.jobs_waiting()
        if waiting < settings.QUEUE_MAX:
            return
        raise QueueFull(
            f"Page {page.name} has {waiting} jobs queued already (QUEUE_MAX); try again later.",
            page.name,
            retry_after_s=self.retry_after_s(page.name, waiting),
        )

    def retry_after_s(self, page_id: str, waiting: int) -> int:
        """Whole seconds until the queue has room, by the page's recent run times."""
        return max(1, math.ceil(self.run_s.get(page_id, 1.0)))

    def ran(self, page_id: str, seconds: float) -> None:
        before = self.run_s.get(page_id)
        self.run_s[page_id] = seconds if before is None else before + RUN_TIME_WEIGHT * (seconds - before)


async def wait_turn(run: JobRun, page: ManagedPage, turn: Turn, lease_id: str | None) -> Claim | DomainError:
    """Wait for the job's turn on the page (its place taken at enqueue), until
    its queue deadline or a client's cancel: the claim, or why the job ends
    without running. A worker that stops gives the place up; the job stays
    queued in the store for the next start."""
    job = run.job
    try:
        await asyncio.wait(
            {turn.future, run.cancel_requested}, timeout=max(0.0, job.queue_deadline - time.time()),
            return_when=asyncio.FIRST_COMPLETED,
        )
    except asyncio.CancelledError:
        page.leave_queue(turn)
        raise
    if run.cancel_requested.done() or not turn.handed:
        page.leave_queue(turn)
        if run.cancel_requested.done():
            return Cancelled(CANCELLED_ERROR, page.name)
        waited = job.queue_deadline - job.enqueued_at
        return QueueTimedOut(f"Page {page.name} stayed busy: the job waited {waited:g} s in its queue.", page.name)
    try:
        return page.claim_turn(turn, lease_id)
    except DomainError as refused:  # the lease it waited under is gone, or the page was closed
        return refused
