"""Jobs that wait for their page (X-Queue-Timeout): the room left in a
page's queue, and one queued job's wait for its turn.

A queued job waits in the page's own line (`Line`, browser/pages.py), beside the
plain calls waiting their PAGE_WAIT_S, so the release of the page hands it
to the next in line at once. The job runner (jobs/runner.py) owns the
queued jobs as it owns the running ones; this module holds what it needs to
decide and to wait.

QUEUE_MAX holds under concurrency: a start takes its room in the queue in
the same step as it counts the queue (`JobQueue.take_room`, no await
between them), and holds it while its row is stored, until the job stands
in its line (or was not stored). Counting and joining with the store's
write between them let forty starts released together all pass the count.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

from browser.broker import WaitCancelled
from browser.pages import Claim, ManagedPage, Waiter
from browser.registry import PageRegistry
from core.errors import Cancelled, DomainError, PageNotOpen, QueueFull, QueueTimedOut
from core.routes import ANY
from jobs.run import CANCELLED_ERROR, JobRun

# How much each new run time weighs in a page's estimate.
RUN_TIME_WEIGHT = 0.2


@dataclass
class Place:
    """Where a queued job waits: its place in its page's line, or in the line of `any`."""

    waiter: Waiter
    ran_out: str  # the sentence of a wait that ran out, before "the job waited ..."

    @property
    def target(self) -> str:
        return self.waiter.target


# Where a job without a page stands: its place in line, why it cannot have one, or None (a back-off first).
Waiting = Place | DomainError | None


def place_for(run: JobRun) -> Place:
    """The queued job's place in its page's line, or in the line of `any`,
    taken now through the broker; a lease it waits under stays alive."""
    job = run.job
    target = run.page.name if run.page is not None else ANY
    broker = run.parts.pages.broker
    waiter = broker.join(target, priority=job.priority, job_id=job.id, lease_id=run.lease_id)
    run.locate = lambda: broker.position(waiter)
    return Place(waiter, f"Page {target} stayed busy" if run.page is not None else "No page was free")


@dataclass(eq=False)
class Room:
    """One queued start's room under QUEUE_MAX, from its count until its job
    stands in the line (or was not stored). Given back once."""

    joining: collections.Counter[str]
    name: str  # the page's, or "any"
    held: bool = True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        self.joining[self.name] -= 1
        if self.joining[self.name] <= 0:
            del self.joining[self.name]


class RecentRefusals:
    """When starts were refused (a busy page, a full queue, MAX_JOBS): the pressure's last minute."""

    def __init__(self) -> None:
        self.at: collections.deque[float] = collections.deque()

    def add(self) -> None:
        self.at.append(time.monotonic())

    def last_minute(self) -> int:
        cutoff = time.monotonic() - 60
        while self.at and self.at[0] < cutoff:
            self.at.popleft()
        return len(self.at)


class JobQueue:
    def __init__(self, pages: PageRegistry, running: Mapping[str, JobRun]) -> None:
        self.pages = pages
        # The runner's jobs by id (its `running`), read for when the job on a page started.
        self.running = running
        # A page's recent run time per job (seconds), for Retry-After.
        self.run_s: dict[str, float] = {}
        # Per line (a page's name, or "any"): the queued starts that took
        # their room and are being stored, not in the line yet.
        self.joining: collections.Counter[str] = collections.Counter()

    def take_room(self, page: ManagedPage | None) -> Room:
        """Room for one more job in the page's queue (or the queue of `any`),
        taken at once; QueueFull (429) when QUEUE_MAX jobs wait there already,
        counting the starts that are joining it."""
        name = page.name if page is not None else ANY
        in_line = self.pages.broker.jobs_waiting(name)
        waiting = in_line + self.joining[name]
        if waiting >= settings.QUEUE_MAX:
            where = f"Page {name} has" if page is not None else "Any page has"
            raise QueueFull(
                f"{where} {waiting} jobs queued already (QUEUE_MAX); try again later.",
                name,
                retry_after_s=self.retry_after_s(page, waiting),
            )
        self.joining[name] += 1
        return Room(self.joining, name)

    def retry_after_s(self, page: ManagedPage | None, waiting: int) -> int:
        """Whole seconds, at least 1, until the queue of `page` (None: of
        `any`) holding `waiting` jobs has room: until the page is free (for
        `any`, the first open page to be), when the first job in line leaves
        the line for it; then one recent run time for each further job that
        must leave before fewer than QUEUE_MAX wait (for `any`, the pages'
        recent run times shared among them)."""
        now = time.time()
        pages = [page] if page is not None else [open_ for open_ in self.pages.pages.values() if not open_.closed]
        if not pages:
            return 1
        free_in = min(self.free_in_s(one, now) for one in pages)
        per_job = sum(self.run_time_s(one.name) for one in pages) / len(pages) / len(pages)
        further = max(0, waiting - settings.QUEUE_MAX)
        return max(1, math.ceil(free_in + further * per_job))

    def free_in_s(self, page: ManagedPage, now: float) -> float:
        """Seconds until `page` is likely free: what its running job has left
        of the page's recent run time (none once past it); a recent run time
        when something else holds it (a plain call: its start is not kept);
        none when nothing does. (A job can wait for a leased page only under
        its lease, and so only while a call under it holds the page.)"""
        run = self.running.get(page.job_id) if page.job_id else None
        if run is not None:
            began = run.job.attempt_started_at or run.job.started_at  # this attempt's start (X-Retry)
            return max(0.0, self.run_time_s(page.name) - (now - began))
        return self.run_time_s(page.name) if page.held else 0.0

    def run_time_s(self, page_id: str) -> float:
        """A page's recent run time per job: a second until a job has run on it."""
        return self.run_s.get(page_id, 1.0)

    def ran(self, page_id: str, seconds: float) -> None:
        before = self.run_s.get(page_id)
        self.run_s[page_id] = seconds if before is None else before + RUN_TIME_WEIGHT * (seconds - before)


async def wait_turn(run: JobRun, place: Place) -> Claim | DomainError:
    """Wait for the job's turn (its place taken at enqueue), until its queue
    deadline or a client's cancel: the claim, or why the job ends without
    running. A worker that stops gives the place up; the job stays queued in
    the store for the next start."""
    job = run.job
    deadline = time.monotonic() + max(0.0, job.queue_deadline - time.time())
    try:
        return await run.parts.pages.broker.wait(place.waiter, deadline=deadline, cancel=run.cancel_requested)
    except WaitCancelled:
        return Cancelled(CANCELLED_ERROR, place.target)
    except TimeoutError:
        waited = job.queue_deadline - job.enqueued_at
        return QueueTimedOut(f"{place.ran_out}: the job waited {waited:g} s in its queue.", place.target)
    except DomainError as refused:  # the lease it waited under is gone, or the page was closed
        return refused


async def back_off(run: JobRun) -> Place | DomainError:
    """Wait out a retry's back-off (X-Retry) until the job's `retry_at`: its
    place in line once it is over; or why it ends instead (a client
    cancelled it meanwhile, its page was closed, or leased to another flow).
    A worker that stops ends the wait; the job stays queued in the store,
    its back-off with it, for the next start."""
    try:
        async with asyncio.timeout(max(0.0, run.job.retry_at - time.time())):
            await asyncio.shield(run.cancel_requested)
    except TimeoutError:
        if run.page is not None:  # by name: a page closed and opened again meanwhile is that page
            page = run.parts.pages.pages.get(run.page.name)
            if page is None:
                return PageNotOpen(f"Page {run.page.name} was closed before the job's next attempt.", run.page.name)
            run.page = page
        try:
            return place_for(run)
        except DomainError as refused:  # the page is leased to another flow now
            return refused
    return Cancelled(CANCELLED_ERROR, run.job.page_id)
