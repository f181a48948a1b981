"""The job runner: the one owner of a worker's in-process job state.

The runtime's (worker/runtime.py), on its pages; it owns what of the jobs
lives in memory rather than in the store:

- `running`: the jobs this worker runs now, by id (each a `JobRun`);
- `held`: the upper bound on the jobs held, which spares most starts a count;
- `starting`: the Idempotency-Keys whose start is being stored now;
- `recent`: the last polling jobs that ended here, as their ends stored them;
- `waiters`: the long-polls, by job.

The invariants between them (checked by `check`, which the tests call):

1. A job is in `running` from the moment its row is stored until its run's
   task ends, through every attempt; its row reads `queued` while it has no
   page, else `running`, unless its end is stored (`run.stored`); its page
   names it (`page.job_id`) from its claim until the plugin lets it go.
2. A job is in `recent` only once its end is stored, only as that end
   stored it, and only a polling job (nothing else changes such a row until
   it is deleted, past its deadline or forgotten through this runner).
3. Long-polls on a job are woken only after its end is stored (`run.stored`
   is set first), so a woken waiter answers the stored job without a read.
4. A key is in `starting` only while its start awaits the store; a second
   start with it meanwhile is refused, never stored twice.
5. `held` is never below the number of jobs the store holds.

The store's side: jobs/services.py, jobs/selectors.py; one run: jobs/run.py;
a job's walk from start to delivery: docs/design/JOB_CORE.md.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from typing import Any

from django.conf import settings

from browser.pages import Claim, ManagedPage
from core import metrics
from core.auth import FULL
from core.db_thread import on_db_thread
from core.errors import (
    ActionFailed,
    DomainError,
    JobNotCancellable,
    JobsFull,
    JobStillRunning,
    KeyInFlight,
    KeyReused,
    LeaseRequired,
    NoSuchAction,
    NoSuchJob,
    PageBusy,
    QueueFull,
    Refusal,
)
from core.events import Event
from core.routes import ANY
from core.runtime import Tracker
from jobs.models import Job
from jobs.notify import asked
from jobs.options import JobOptions
from jobs.queueing import JobQueue, Place, RecentRefusals, Room, Waiting, back_off, place_for, wait_turn
from jobs.run import JobRun, WorkerParts, failure, store_end
from jobs.selectors import find_held_by_key, find_jobs, find_live_job, find_queued
from jobs.services import NO_SUCH_JOB, HeldJobsBound, begin_job, create_job, forget_job
from jobs.shapes import publish
from jobs.waiting import RecentEnds, Waiters
from plugins.framework import Action, find_action


class JobRunner:
    def __init__(self, parts: WorkerParts, tracker: Tracker, recent_size: int = 32) -> None:
        self.parts, self.pages, self.tracker = parts, parts.pages, tracker
        self.publish = functools.partial(publish, parts.bus)
        self.running: dict[str, JobRun] = {}
        self.held = HeldJobsBound()
        self.starting: set[str] = set()
        self.recent = RecentEnds(recent_size)
        self.waiters = Waiters()
        self.queue = JobQueue(self.pages, self.running)
        self.refusals = RecentRefusals()

    # --- starting ----------------------------------------------------------------------

    async def submit(
        self, *, page: ManagedPage | None, action: Action, params: dict[str, Any], lease_id: str | None,
        options: JobOptions,
    ) -> Job:
        """Claim the idle page (any free one when `page` is None: `any`) for a
        job, store it and start it in the background: the stored job. A busy
        page answers PageBusy at once, or, with X-Queue-Timeout, the job waits
        in line. With an Idempotency-Key, a repeat of a start whose job is
        held answers that job."""
        key = options.idempotency_key
        if key is None:
            return await self._claim_and_start(page, action, params, lease_id, options)
        page_name = page.name if page is not None else ANY
        digest = options.digest(page_name, action.route, params)
        if key in self.starting:
            raise KeyInFlight("A job start with this Idempotency-Key is still being stored; try again in a moment.", page_name)
        self.starting.add(key)
        try:
            earlier = await on_db_thread(find_held_by_key)(key=key, now=time.time())
            if earlier is None:
                return await self._claim_and_start(page, action, params, lease_id, options, digest)
            if earlier.request_digest != digest:
                raise KeyReused("This Idempotency-Key was sent with a different request (route, page, parameters "
                                "or job headers); use a new key for a new job.", page_name)
            return earlier
        finally:
            self.starting.discard(key)

    async def _claim_and_start(
        self, page: ManagedPage | None, action: Action, params: dict[str, Any], lease_id: str | None,
        options: JobOptions, digest: str | None = None,
    ) -> Job:
        job_id = secrets.token_hex(8)
        try:
            try:
                claim = await self.pages.broker.take_now(page.name if page is not None else ANY, job_id=job_id, lease_id=lease_id)
            except PageBusy:
                if options.queue_timeout is None:
                    raise
                try:
                    room = self.queue.take_room(page)
                except QueueFull:
                    metrics.queue_full()
                    raise
                start = self._enqueue(job_id, page, action, params, lease_id, options, digest, room)
            else:
                start = self._start(job_id, claim, action, params, options, digest, on_any=page is None)
            # Shielded: a client that leaves now must not cut the start in two (a row
            # stored, its run never started, a job `running` until the next restart).
            return await asyncio.shield(self.parts.tasks.spawn(start, about=f"job {job_id}'s start"))
        except (PageBusy, QueueFull, JobsFull):
            self.refusals.add()
            raise

    async def _start(
        self, job_id: str, claim: Claim, action: Action, params: dict[str, Any], options: JobOptions, digest: str | None,
        on_any: bool,
    ) -> Job:
        """Store the job (JobsFull past MAX_JOBS) and start its run; the page
        is released if it cannot start."""
        try:
            job = await on_db_thread(create_job)(
                job_id=job_id, page_id=claim.page.name, plugin=action.route, params=params, options=options,
                held=self.held, digest=digest, under_lease=claim.lease is not None, on_any=on_any,
                family_version=action.version,
            )
        except BaseException:
            self.pages.broker.release(claim)
            raise
        run = self.running[job_id] = JobRun(
            job=job, claim=claim, page=None if on_any else claim.page, lease_id=claim.lease.id if claim.lease else None,
            parts=self.parts,
        )
        run.task = self.parts.tasks.spawn(self._lifecycle(run, action, params, None), about=f"job {job_id} on page {claim.page.name}")
        self.publish(Event.JOB_STARTED, job)
        return job

    async def _enqueue(
        self, job_id: str, page: ManagedPage | None, action: Action, params: dict[str, Any], lease_id: str | None,
        options: JobOptions, digest: str | None, room: Room,
    ) -> Job:
        """Store the queued job (JobsFull past MAX_JOBS) and put it in its
        page's line (or the line of `any`); it runs when its turn comes. Its
        room in the queue, taken before the store's write, is given back in
        the step that puts it in line."""
        try:
            job = await on_db_thread(create_job)(
                job_id=job_id, page_id=page.name if page is not None else ANY, plugin=action.route, params=params,
                options=options, held=self.held, digest=digest, queued=True, under_lease=lease_id is not None,
                on_any=page is None, family_version=action.version,
            )
            self._wait_then_run(job, page, action, params, lease_id)
        finally:
            room.release()
        return job

    def _wait_then_run(
        self, job: Job, page: ManagedPage | None, action: Action, params: dict[str, Any], lease_id: str | None
    ) -> JobRun:
        """Take the job's place in its page's line (or the line of `any`) now,
        so a poll and the 202 know its position, and wait for its turn in a
        task of its own. A job waiting out a retry's back-off (after a
        restart) takes its place once the back-off is over."""
        run = self.running[job.id] = JobRun(job=job, claim=None, page=page, lease_id=lease_id, parts=self.parts)
        try:
            place: Waiting = None if job.retry_at is not None else place_for(run)
        except DomainError as refused:  # its page closed, or its lease went, while its row was stored
            place = refused  # it ends at once, stored with the refusal, as a poll then shows
        run.task = self.parts.tasks.spawn(self._lifecycle(run, action, params, place), about=f"queued job {job.id} on {job.page_id}")
        self.publish(Event.JOB_QUEUED, job)
        return run

    async def _lifecycle(self, run: JobRun, action: Action, params: dict[str, Any], place: Waiting) -> None:
        """A job on this worker, from its start to its stored end: its wait in
        line when it has no page yet, its run, and again for each retry
        (X-Retry); or its end without running (its wait ran out, a cancel,
        its lease gone). Listed in `running` for exactly as long."""
        try:
            stored = await self._attempts(run, action, params, place)
        finally:
            del self.running[run.job.id]
        self._ended(stored)

    async def _attempts(self, run: JobRun, action: Action, params: dict[str, Any], place: Waiting) -> Job | None:
        while True:
            if run.claim is None:
                place = place or await back_off(run)
                claim = await wait_turn(run, place) if isinstance(place, Place) else place
                if isinstance(claim, DomainError):
                    return await run.end_unrun(claim)
                run.claim = claim
                try:
                    began = await on_db_thread(begin_job)(
                        job=run.job, now=time.time(), page_id=claim.page.name, family_version=action.version
                    )
                except BaseException:  # the store refused, or the worker stops: the page goes on
                    self.pages.broker.release(claim)
                    raise
                if not began:
                    self.pages.broker.release(claim)  # no longer queued in the store (an operator's command): the page goes on
                    return None
                metrics.job_waited(run.job.attempt_started_at - run.job.enqueued_at)
                self.publish(Event.JOB_STARTED, run.job)
            stored = await self._execute(run, action, params)
            if not run.requeued:
                return stored
            place = None
            metrics.jobs_retried(run.job.past_attempts[-1]["status"])
            self.publish(Event.JOB_RETRYING, run.job)

    async def _execute(self, run: JobRun, action: Action, params: dict[str, Any]) -> Job | None:
        began, page_id = time.monotonic(), run.claim.page.name
        try:
            return await run.execute(
                action, params, on_progress=lambda run: self.publish(Event.JOB_PROGRESS, run.shown()), on_human=asked,
            )
        finally:
            self.queue.ran(page_id, time.monotonic() - began)

    def _ended(self, stored: Job | None) -> None:
        if stored is None:
            return
        self.recent.add(stored)
        self.waiters.wake(stored.id)
        self.publish(Event.JOB_ENDED, stored)
        if stored.mode == Job.Mode.POLL:
            self.tracker.touch()  # a polling job stops counting: the idle clock starts now

    async def resume_queued(self) -> None:
        """After a restart, once the browser is up: the jobs still queued in
        the store take their places again, in their order, with their own
        deadlines (time down counts). A page that is not open is opened
        again; a job that waited under a lease ends 423, as the restart
        dropped every lease."""
        for job in await on_db_thread(find_queued)():
            found = find_action(*job.plugin.split("/", 1)) if "/" in job.plugin else None
            try:
                if found is None:
                    raise ActionFailed(f"No plugin action {job.plugin} after the restart.", job.page_id)
                if job.under_lease:
                    raise LeaseRequired("The lease this job was queued under is gone: the worker restarted.", job.page_id)
                page = None if job.page_id == ANY else (self.pages.pages.get(job.page_id) or await self.pages.open(job.page_id))
                params = found.validate_stored(job.params)
            except Refusal as refused:
                stored = await store_end(job, failure(refused, job.page_id, time.time(), 0.0), [], Job.State.DONE, None)
                self._ended(stored)
                continue
            self._wait_then_run(job, page, found, params, None)

    async def rerun(self, job_id: str, *, lease_id: str | None) -> Job:
        """Start an ended job (still held) again, as its client started it:
        the same route, page (or `any`), parameters and job headers but its
        Idempotency-Key. JobStillRunning while it is queued or running."""
        earlier = await self.poll(job_id)
        if not earlier.ended:
            raise JobStillRunning(f"Job {job_id} is still {earlier.state}; it can be re-run once it has ended.", earlier.page_id)
        action = find_action(*earlier.plugin.split("/", 1))
        if action is None:
            raise NoSuchAction(f"No plugin action {earlier.plugin} on this worker: its family is not loaded.", earlier.page_id)
        page = None if earlier.on_any else self.pages.get(earlier.page_id)
        return await self.submit(
            page=page, action=action, params=action.validate_stored(earlier.params), lease_id=lease_id,
            options=JobOptions.again(earlier),
        )

    # --- reading -----------------------------------------------------------------------

    def shown(self, job: Job) -> Job:
        """The job as polls show it: a job running here with its latest
        progress report (kept in memory until its end stores it)."""
        run = self.running.get(job.id)
        if run is not None and not job.ended:
            job.progress = run.progress
            job.human = run.human
        if job.state == Job.State.QUEUED:
            job.queue_position = run.locate() if run is not None and run.locate is not None else None
        return job

    async def poll(self, job_id: str) -> Job:
        """The job as a poll shows it, or NoSuchJob."""
        now = time.time()
        job = self.recent.get(job_id, now) or await on_db_thread(find_live_job)(job_id=job_id, now=now)
        if job is None:
            raise NoSuchJob(NO_SUCH_JOB)
        return self.shown(job)

    async def wait(self, job_id: str, wait_s: float, role: str = FULL) -> Job:
        """A long-poll: the job as a poll shows it once it has ended, or after
        `wait_s` with it still running; NoSuchJob at once for an unknown job.
        A read key (`role`) may not take the full key's share (core/caps.py)."""
        with self.waiters.waiting(job_id, role) as ended:
            # A job running here is running in the store too, until its end is
            # stored: no read is needed to know it, nor to show it.
            run = self.running.get(job_id)
            if run is None:
                job = await self.poll(job_id)
                if job.ended:
                    return job
            try:
                async with asyncio.timeout(wait_s):
                    await ended
            except TimeoutError:
                pass
            if run is not None and run.stored is not None:
                return run.stored  # woken by its end: the job as that end stored it
            if run is not None and not run.task.done():
                return run.shown()
            return await self.poll(job_id)

    async def jobs(self, **query: Any) -> tuple[list[Job], tuple[float, str] | None]:
        """A page of the job list (`selectors.find_jobs`), as polls show the jobs."""
        found, after = await on_db_thread(find_jobs)(now=time.time(), **query)
        return [self.shown(job) for job in found], after

    # --- control -----------------------------------------------------------------------

    async def cancel(self, job_id: str) -> Job:
        """Stop a job running here and answer it once it is stored as
        cancelled (its plugin stopped, or its page reopened after
        CANCEL_GRACE_S). A job that ends on its own first keeps its own
        outcome, and the cancel is refused naming it, like any ended job."""
        run = self.running.get(job_id)
        requested = run is not None and run.request_cancel()
        if run is not None and run.task is not None:
            await asyncio.wait({run.task})  # its end stored, whichever outcome won
        job = await self.poll(job_id)
        if requested and job.state == Job.State.CANCELLED:
            return job
        if job.ended:
            raise JobNotCancellable(f"Job {job_id} has already ended: its state is {job.state}.", job.page_id)
        raise JobNotCancellable(f"Job {job_id} is not running on this worker, so it cannot be cancelled here.", job.page_id)

    async def forget(self, job_id: str) -> None:
        """Delete an ended job and its files now; it leaves `recent` before its
        row goes, and again after (a poll between them reads the store)."""
        self.recent.forget(job_id)
        await on_db_thread(forget_job)(job_id=job_id, now=time.time())
        self.recent.forget(job_id)

    async def stop(self) -> None:
        """On stop: cancel the jobs in hand, and wait for their plugins to let
        their pages go; the jobs stay `running` for recovery."""
        tasks = [task for run in self.running.values() for task in (run.task, run.plugin) if task is not None]
        for task in tasks:
            task.cancel()
        if tasks:  # bounded: a plugin that swallows its cancellation does not hold the stop
            await asyncio.wait(tasks, timeout=settings.CANCEL_GRACE_S)

    # --- the invariants ------------------------------------------------------------------

    def check(self) -> None:
        """Raise AssertionError naming the first invariant (module docstring) that does not hold."""
        for job_id, run in self.running.items():
            assert run.job.id == job_id, f"running[{job_id}] holds job {run.job.id}"
            assert run.task is not None and not run.task.done(), f"job {job_id}'s run has ended but it is still listed"
            if run.stored is None:
                assert run.job.state in Job.LIVE_STATES, f"job {job_id} reads {run.job.state} before its end is stored"
            if run.claim is None:
                assert run.job.state == Job.State.QUEUED, f"job {job_id} has no page yet but reads {run.job.state}"
            elif not run.claim.released:
                assert run.claim.page.job_id == job_id, f"page {run.claim.page.name} does not name job {job_id}"
        for job_id, job in self.recent.jobs.items():
            assert job.ended and job.mode == Job.Mode.POLL, f"recent job {job_id} is {job.state}, {job.mode}"
            assert job_id not in self.running or self.running[job_id].stored is not None, f"job {job_id} is recent before its end"
        assert self.waiters.count >= sum(map(len, self.waiters.by_job.values())), "a waiter is counted nowhere"
        if self.held.bound is not None:
            assert self.held.bound >= sum(1 for run in self.running.values() if run.stored is None), "held bound below running"
