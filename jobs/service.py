"""The job service: submit, run, poll, recover and sweep.

Sync functions hold the database work (each transaction is one function);
the async ones run on the worker's event loop and call them on the database
thread (`on_db_thread`, core/db_thread.py), the one path the worker
has to the database. The state changes themselves are `Job` methods.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet

from activity import log as request_log
from activity.tracker import tracker
from browser.pages import Claim, ManagedPage, registry
from core import events, metrics
from core.api import ApiError, error_body, first_line
from core.db_thread import BATCH_ROWS, adrain, drain, on_db_thread, persist
from core.tasks import spawn
from jobs.models import DeliveryAttempt, Job, webhook_window
from jobs.options import JobOptions
from jobs.progress import ProgressRelay
from jobs.shapes import job_body
from jobs.waiting import waiters
from media_store import store as media
from plugins.calls import run_claimed
from plugins.framework import Action, Context, Outcome

log = logging.getLogger("penelope.jobs")

INTERRUPTED_ERROR = "job interrupted: the worker stopped before it ended"
CANCELLED_ERROR = "job cancelled by a client"
CANCELLED_STATUS = 499  # nginx's "client closed request", as the request log uses it


@dataclass
class RunningJob:
    """A job this worker runs now: what a cancel, a poll and a stop need."""

    job: Job
    claim: Claim
    task: asyncio.Task | None = None  # the run: the plugin, then the end's store
    plugin: asyncio.Task | None = None
    progress: dict[str, Any] | None = None
    # Set when a client cancels: a plain future, which the run waits on beside its plugin.
    cancel_requested: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    # Its outcome is chosen (the plugin's or the cancel's): a cancel is too late.
    decided: bool = False
    # The job as its end was stored: what a long-poll woken by that end answers.
    stored: Job | None = None

    def request_cancel(self) -> bool:
        """Ask the run to stop; False when its outcome is already chosen."""
        if self.decided or self.cancel_requested.done():
            return False
        self.cancel_requested.set_result(None)
        return True


# Jobs running on this worker's loop, by id.
running: dict[str, RunningJob] = {}


def publish_job(event: str, job: Job, **fields: Any) -> None:
    events.publish(
        event, page_id=job.page_id, job_id=job.id, job=lambda: job_body(job, time.time()), state=job.state,
        mode=job.mode, **fields,
    )


def new_job_id() -> str:
    return secrets.token_hex(8)


# --- starting ------------------------------------------------------------------


class HeldJobsBound:
    """An upper bound on the jobs held, so that a job start counts them in the
    store only when the count may have reached MAX_JOBS.

    Only this worker creates jobs, and one worker serves a store (its lock);
    everything else (a hold running out, a delivery, a sweep, an operator's
    command) only lowers the count. So an exact count plus the jobs created
    since is never below the real count, and while it stays under MAX_JOBS a
    start needs no count. The count was the dearest step of a job start
    (docs/BENCHMARKS.md).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bound: int | None = None  # unknown until the first count

    def reserve(self, count_held: Callable[[], int]) -> bool:
        """Whether one more job fits under MAX_JOBS; it is counted in when it does.
        A reservation whose job is then not stored leaves the bound one too
        high, which is safe: the next start near the limit counts again."""
        with self._lock:
            if self._bound is None or self._bound >= settings.MAX_JOBS:
                self._bound = count_held()
            if self._bound >= settings.MAX_JOBS:
                return False
            self._bound += 1
            return True


held_jobs = HeldJobsBound()


def create_job(
    *, job_id: str, page_id: str, plugin: str, params: dict[str, Any], options: JobOptions, digest: str | None = None
) -> Job:
    """Insert the running job, or 503 when MAX_JOBS are held."""
    if not held_jobs.reserve(lambda: Job.objects.held(time.time()).count()):
        raise ApiError(
            503,
            f"The worker already holds {settings.MAX_JOBS} jobs (MAX_JOBS); "
            "try again when some have ended and been read or delivered.",
            page_id,
        )
    fields = {
        "id": job_id,
        "page_id": page_id,
        "plugin": plugin,
        "params": json.loads(json.dumps(params, default=str)),
        "mode": options.mode,
        "ttl": options.ttl,
        "callback": options.callback,
        "started_at": time.time(),
        "idempotency_key": options.idempotency_key,
        "request_digest": digest,
    }
    if options.idempotency_key is None:
        return Job.start(**fields)  # one INSERT, committed on its own
    with transaction.atomic():
        # A job past its deadline that the sweep has not reached yet gives its key up.
        Job.objects.filter(idempotency_key=options.idempotency_key).update(idempotency_key=None)
        return Job.start(**fields)


async def submit(
    *, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None, options: JobOptions
) -> Job:
    """Claim the idle page for a job (409 at once otherwise), store it and
    start it in the background: the stored, running job. With an
    Idempotency-Key, a repeat of a start whose job is held answers that job."""
    key = options.idempotency_key
    if key is None:
        return await claim_and_start(page, action, params, lease_id, options)
    digest = request_digest(page.name, action.route, params, options)
    if key in starting_keys:
        raise ApiError(409, "A job start with this Idempotency-Key is still being stored; try again in a moment.", page.name)
    starting_keys.add(key)
    try:
        earlier = await on_db_thread(find_by_key)(key, time.time())
        if earlier is None:
            return await claim_and_start(page, action, params, lease_id, options, digest)
        if earlier.request_digest != digest:
            raise ApiError(
                422,
                "This Idempotency-Key was sent with a different request (route, page, parameters or job headers); "
                "use a new key for a new job.",
                page.name,
            )
        return earlier
    finally:
        starting_keys.discard(key)


# Idempotency keys whose start is being stored now (a repeat answers 409).
starting_keys: set[str] = set()


def request_digest(page_id: str, route: str, params: dict[str, Any], options: JobOptions) -> str:
    """What makes two starts the same request: route, page, parameters and job headers."""
    request = [route, page_id, params, options.ttl, options.callback]
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


def find_by_key(key: str, now: float) -> Job | None:
    """The held job started with this Idempotency-Key."""
    return Job.objects.held(now).filter(idempotency_key=key).first()


async def claim_and_start(
    page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None, options: JobOptions,
    digest: str | None = None,
) -> Job:
    job_id = new_job_id()
    claim = await page.try_acquire(lease_id, job_id)
    # Shielded: a client that leaves now must not cut the start in two (a row
    # stored, its run never started, a job `running` until the next restart).
    start = start_job(job_id, claim, action, params, options, digest)
    return await asyncio.shield(spawn(start, about=f"job {job_id}'s start"))


async def start_job(
    job_id: str, claim: Claim, action: Action, params: dict[str, Any], options: JobOptions, digest: str | None = None
) -> Job:
    """Store the job (503 past MAX_JOBS) and start its run; the page is
    released if it cannot start."""
    try:
        job = await on_db_thread(create_job)(
            job_id=job_id, page_id=claim.page.name, plugin=action.route, params=params, options=options, digest=digest
        )
    except BaseException:
        claim.page.release(claim)
        raise
    run = running[job_id] = RunningJob(job=job, claim=claim)
    run.task = spawn(run_job(run, action, params), about=f"job {job_id} on page {claim.page.name}")
    run.task.add_done_callback(lambda _: running.pop(job_id, None))
    publish_job("job.started", job)
    return job


async def run_job(run: RunningJob, action: Action, params: dict[str, Any]) -> None:
    """Run the plugin exactly as a plain call would, then keep its answer,
    or the cancel's when a client cancelled it first.

    A worker that stops cancels this task; the job stays `running` in the
    store and the next start marks it interrupted.
    """
    job, claim = run.job, run.claim
    # Files stored during the run are held for the job from the start, for
    # as long as the run and its result may need them; the end sets the real deadline.
    held_until = time.time() + action.time_limit(params) + max(settings.MAX_TTL_S, webhook_window())

    def progressed(note: dict[str, Any]) -> None:
        run.progress = note
        publish_job("job.progress", job_with_progress(run))

    relay = ProgressRelay(progressed)

    def reported(note: dict[str, Any]) -> None:
        run.progress = note  # a poll shows it at once; the bus hears of it at most ~10 times a second
        relay.report(note)

    ctx = Context(page_id=claim.page.name, media_holder=job.id, media_held_until=held_until, on_progress=reported)
    log_row = {"family": action.family, "action": action.name, "page_id": claim.page.name, "job_id": job.id}
    started_at = time.time()
    request_log.record_job(**log_row, started_at=started_at)
    plugin = run.plugin = spawn(run_claimed(claim, action, params, ctx), about=f"job {job.id}'s plugin {action.route}")
    try:
        cancelled = await plugin_ended_or_cancelled(run, plugin)
    except asyncio.CancelledError:  # the worker stops
        plugin.cancel()
        raise
    finally:
        relay.close()
    run.decided = True
    if cancelled:
        outcome = Outcome(CANCELLED_STATUS, error_body(CANCELLED_ERROR, claim.page.name), started_at, time.time() - started_at)
    elif plugin.cancelled() or plugin.exception() is not None:
        if not plugin.cancelled():
            log.error("job %s could not run", job.id, exc_info=plugin.exception())
        outcome = Outcome(500, error_body("The job could not run; the details are in the worker's log.", claim.page.name), started_at, 0)
    else:
        outcome = plugin.result()
    request_log.record_job(
        **log_row, status=outcome.status, started_at=outcome.started_at, duration_ms=outcome.duration_s * 1000
    )
    # The page is free again; the answer stays in memory until it is stored,
    # for as long as this worker runs (the database may be locked by another
    # process for a while). Polls meanwhile answer `running`.
    state = Job.State.CANCELLED if cancelled else Job.State.DONE
    stored = await store_end(job, outcome, ctx.media_tokens, state, run.progress)
    if stored is None:
        log.warning("job %s's answer was not kept: it was no longer running, or could not be stored", job.id)
        return
    run.stored = stored
    recent_ends.add(stored)
    publish_job("job.ended", stored)
    if stored.mode == Job.Mode.POLL:
        tracker.touch()  # a polling job stops counting: the idle clock starts now


async def store_end(
    job: Job, outcome: Outcome, media_tokens: list[str], state: str, progress: dict[str, Any] | None
) -> Job | None:
    """Store the job's end: tried again while the database is locked
    (`persist`), and when it cannot be stored for any other reason (a
    constraint, a value the database refuses), stored instead as a 500 that
    says why, so that every job ends, frees its MAX_JOBS place, wakes its
    long-polls and is delivered. Only when that fails too does the job stay
    `running` until the next start marks it interrupted."""
    what = f"job {job.id}'s end"
    # The end is written on a copy of the job as it started: the conditional
    # UPDATE needs nothing more from the store, and the loop's copy is never
    # changed under a reader.
    try:
        return await persist(finish_job, copy.copy(job), outcome, media_tokens, state, progress, what=what)
    except Exception as error:
        log.exception("%s could not be stored; a 500 that says why is stored instead", what)
        reason = f"{type(error).__name__}: {first_line(str(error))}"
        failed = Outcome(
            500,
            error_body(f"The job's answer could not be stored ({reason}); the details are in the worker's log.", job.page_id),
            outcome.started_at,
            outcome.duration_s,
        )
    try:
        return await persist(finish_job, copy.copy(job), failed, media_tokens, Job.State.DONE, progress, what=what)
    except Exception:
        log.exception("%s could not be stored as a 500 either; it stays running until the next start", what)
        return None


async def plugin_ended_or_cancelled(run: RunningJob, plugin: asyncio.Task) -> bool:
    """Wait for the plugin to end, or for a client's cancel; answers whether
    the job was cancelled. A cancelled plugin gets CANCEL_GRACE_S to stop;
    then its browser page is closed and opened again under the same name (its
    browser calls fail from then on), and the page is free whatever the
    plugin does next."""
    await asyncio.wait({plugin, run.cancel_requested}, return_when=asyncio.FIRST_COMPLETED)
    if plugin.done() or not run.cancel_requested.done():
        # A plugin that ended keeps its outcome, even when a cancel landed in
        # the same turn of the loop: its result is never dropped.
        return False
    plugin.cancel()
    stopped, _ = await asyncio.wait({plugin}, timeout=settings.CANCEL_GRACE_S)
    if not stopped:
        log.warning("job %s's plugin did not stop within %g s of its cancel; its page is reopened", run.job.id, settings.CANCEL_GRACE_S)
        try:
            await registry.reopen_tab(run.claim.page)
        finally:
            run.claim.page.release(run.claim)
    return True


def job_with_progress(run: RunningJob) -> Job:
    """The running job as polls show it: with its latest progress report."""
    run.job.progress = run.progress
    return run.job


def finish_job(
    job: Job, outcome: Outcome, media_tokens: list[str], state: str = Job.State.DONE, progress: dict | None = None
) -> Job | None:
    """Store a job's answer (running -> done, or cancelled) and answer the job
    as stored; None if it was no longer running (or gone). Without files it
    is one conditional UPDATE, committed on its own; with files, their hold
    moves in the same transaction."""
    with transaction.atomic() if media_tokens or job.media_tokens else contextlib.nullcontext():
        ended = job.finish(
            state=state, status=outcome.status, result=outcome.body, finished_at=time.time(),
            media_tokens=media_tokens, progress=progress,
        )
        if not ended:
            return None
        if job.media_tokens:
            hold_media(job)
    return job


def hold_media(job: Job) -> None:
    """Every file the job's run stored (held for it since its put) is now
    held until the job's own deadline: a recovered job's too."""
    media.expire(job.id, until=job.expires_at)


# --- reading -----------------------------------------------------------------------


def find_live_job(job_id: str, now: float) -> Job | None:
    job = Job.objects.filter(id=job_id).first()
    if job is None or (job.ended and job.expires_at <= now):
        return None
    return job


NO_SUCH_JOB = "No such job: the id is unknown, or its result was delivered or has expired."


def shown(job: Job) -> Job:
    """The job as polls show it: a job running here with its latest progress
    report (kept in memory until its end stores it)."""
    run = running.get(job.id)
    if run is not None and not job.ended:
        job.progress = run.progress
    return job


class RecentEnds:
    """The last polling jobs that ended on this worker, as their ends stored
    them, so that the poll (or long-poll) that usually follows an end at once
    is answered without a read.

    Sound because nothing changes a polling job's row after its end: it is
    only deleted, past its deadline (checked here) or forgotten through this
    worker (`forget`, which drops it here too). Webhook jobs are not kept:
    another process's deliverer may delete one. Bounded by count, as results
    may be large.
    """

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


recent_ends = RecentEnds()


async def poll(job_id: str) -> Job:
    """The job as a poll shows it, or 404."""
    job = recent_ends.get(job_id, time.time()) or await on_db_thread(find_live_job)(job_id, time.time())
    if job is None:
        raise ApiError(404, NO_SUCH_JOB)
    return shown(job)


async def forget(job_id: str) -> None:
    """`forget_job` from the loop; the job leaves `recent_ends` before its
    row goes, and again after (a poll between them reads the store)."""
    recent_ends.forget(job_id)
    await on_db_thread(forget_job)(job_id, time.time())
    recent_ends.forget(job_id)


async def cancel(job_id: str) -> Job:
    """`POST /api/v1/jobs/{id}/cancel`: stop a job running here and answer it
    once it is stored as cancelled (its plugin stopped, or its page reopened
    after CANCEL_GRACE_S). A job that ends on its own first keeps its own
    outcome, and the cancel answers 409 naming it, like any ended job."""
    run = running.get(job_id)
    requested = run is not None and run.request_cancel()
    if run is not None and run.task is not None:
        await asyncio.wait({run.task})  # its end stored, whichever outcome won
    job = await poll(job_id)
    if requested and job.state == Job.State.CANCELLED:
        return job
    if job.ended:
        raise ApiError(409, f"Job {job_id} has already ended: its state is {job.state}.", job.page_id)
    raise ApiError(409, f"Job {job_id} is not running on this worker, so it cannot be cancelled here.", job.page_id)


async def wait_for_end(job_id: str, wait_s: float) -> Job:
    """A long-poll: the job as a poll shows it once it has ended, or after
    `wait_s` with it still running; 404 at once for an unknown job."""
    with waiters.waiting(job_id) as ended:
        # A job running here is running in the store too, until its end is
        # stored and published: no read is needed to know it, nor to show it.
        run = running.get(job_id)
        if run is None:
            job = await poll(job_id)
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
            return job_with_progress(run)
        return await poll(job_id)


LIST_LIMIT = 50
MAX_LIST_LIMIT = 200


def find_jobs(*, limit: int, **query: Any) -> tuple[list[Job], tuple[float, str] | None]:
    """A page of the job list (`list_query`): the jobs, and the cursor of the
    next page, or None at the end."""
    found = list(list_query(**query)[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    return found, ((found[-1].started_at, found[-1].id) if more else None)


def list_query(
    *, now: float, state: str | None = None, page_id: str | None = None, plugin: str | None = None,
    after: tuple[float, str] | None = None,
) -> QuerySet[Job]:
    """Held jobs (running, or ended and not past their deadline), newest
    first, after the cursor `after` (`(started_at, id)` of the last job of the
    previous page): one indexed query, without the results."""
    jobs = Job.objects.held(now).defer("result", "params")
    if state is not None:
        jobs = jobs.filter(state=state)
    if page_id is not None:
        jobs = jobs.filter(page_id=page_id)
    if plugin is not None:
        jobs = jobs.filter(plugin=plugin)
    if after is not None:
        started_at, job_id = after
        jobs = jobs.filter(Q(started_at__lt=started_at) | Q(started_at=started_at, id__lt=job_id))
    return jobs.order_by("-started_at", "-id")


async def list_jobs(**query: Any) -> tuple[list[Job], tuple[float, str] | None]:
    found, after = await on_db_thread(find_jobs)(now=time.time(), **query)
    return [shown(job) for job in found], after


def forget_job(job_id: str, now: float) -> None:
    """`DELETE /api/v1/jobs/{id}`: an ended job and its media go now, freeing
    its MAX_JOBS place and its disk; 404 if there is no such job, 409 while
    it runs. The files are unlinked after the commit that drops their rows."""
    with transaction.atomic():
        job = find_live_job(job_id, now)
        if job is None:
            raise ApiError(404, NO_SUCH_JOB)
        if not job.forget():
            raise ApiError(409, f"Job {job_id} is still running; cancel it first.", job.page_id)
        DeliveryAttempt.objects.filter(job_id=job.id).delete()  # its history goes with it
        files = media.drop_rows([job.id])
    media.unlink(files)


# --- counts for the waker ------------------------------------------------------------


def counts() -> tuple[int, int]:
    """(jobs running, webhook jobs waiting for delivery)."""
    return Job.objects.running().count(), Job.objects.webhooks_pending().count()


def held_by_state(now: float) -> dict[str, int]:
    """The jobs held (those that count against MAX_JOBS), by state: the metrics' gauge."""
    held = {state: 0 for state in Job.State.values}
    for row in Job.objects.held(now).order_by().values("state").annotate(count=Count("id")):
        held[row["state"]] = row["count"]
    return held


# --- recovery and sweeps ------------------------------------------------------------
# Each runs in batches of BATCH_ROWS, one short transaction each, with the
# files unlinked after the commit that drops their rows.


def interrupt_batch(now: float) -> int:
    """One batch of recovery: running jobs become interrupted, ended now."""
    with transaction.atomic():
        jobs = list(Job.objects.running()[:BATCH_ROWS])
        held_until: dict[float, list[str]] = {}  # a few distinct deadlines: one media update each
        for job in jobs:
            if job.interrupt(now=now, result=error_body(INTERRUPTED_ERROR, job.page_id)):
                held_until.setdefault(job.expires_at, []).append(job.id)
        for until, holders in held_until.items():
            media.expire_all(holders, until=until)
    return len(jobs)


def discard_expired_batch(now: float) -> int:
    """One batch of jobs past their deadline, deleted with their media."""
    with transaction.atomic():
        ids = list(Job.objects.expired(now).values_list("id", flat=True)[:BATCH_ROWS])
        files = media.drop_rows(ids)
        Job.objects.filter(id__in=ids).delete()
    media.unlink(files)
    return len(ids)


def discard_expired_attempts_batch(now: float) -> int:
    """One batch of delivery attempts past their job's webhook window."""
    ids = list(DeliveryAttempt.objects.expired(now).values_list("id", flat=True)[:BATCH_ROWS])
    DeliveryAttempt.objects.filter(id__in=ids).delete()
    return len(ids)


def recover(now: float | None = None) -> dict[str, int]:
    """At start, before requests: every running job becomes interrupted and
    ended now; jobs past their deadline go without a last try."""
    now = now or time.time()
    counts = {"interrupted": drain(interrupt_batch, now), "expired": drain(discard_expired_batch, now)}
    log_recovery(counts)
    return counts


async def arecover(now: float | None = None) -> dict[str, int]:
    """`recover` from the event loop, a batch at a time on the database thread."""
    now = now or time.time()
    counts = {"interrupted": await adrain(interrupt_batch, now), "expired": await adrain(discard_expired_batch, now)}
    log_recovery(counts)
    return counts


def log_recovery(counts: dict[str, int]) -> None:
    metrics.jobs_interrupted(counts["interrupted"])
    if counts["interrupted"] or counts["expired"]:
        log.info("recovery: %d jobs interrupted, %d past their deadline deleted", counts["interrupted"], counts["expired"])


def sweep(now: float | None = None) -> dict[str, int]:
    """Delete expired jobs, finished media files and expired delivery attempts."""
    now = now or time.time()
    return {
        "jobs": drain(discard_expired_batch, now),
        "files": drain(media.sweep_batch, now),
        "attempts": drain(discard_expired_attempts_batch, now),
    }


async def asweep(now: float | None = None) -> dict[str, int]:
    """`sweep` from the event loop, a batch at a time on the database thread."""
    now = now or time.time()
    return {
        "jobs": await adrain(discard_expired_batch, now),
        "files": await adrain(media.sweep_batch, now),
        "attempts": await adrain(discard_expired_attempts_batch, now),
    }


async def cancel_running() -> None:
    """On stop: cancel the jobs in hand, and wait for their plugins to let
    their pages go; the jobs stay `running` for recovery."""
    tasks = [task for run in running.values() for task in (run.task, run.plugin) if task is not None]
    for task in tasks:
        task.cancel()
    if tasks:  # bounded: a plugin that swallows its cancellation does not hold the stop
        await asyncio.wait(tasks, timeout=settings.CANCEL_GRACE_S)
