"""The job service: submit, run, poll, recover and sweep.

Sync functions hold the database work (each transaction is one function);
the async ones run on the worker's event loop and call them on the database
thread (`on_db_thread`, core/db_thread.py), the one path the worker
has to the database. The state changes themselves are `Job` methods.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from activity import log as request_log
from activity.tracker import tracker
from browser.pages import Claim, ManagedPage
from core.api import ApiError, error_body
from core.db_thread import BATCH_ROWS, adrain, drain, on_db_thread, persist
from core.tasks import spawn
from jobs import signals
from jobs.models import Job, webhook_window
from jobs.options import JobOptions
from media_store import store as media
from plugins.calls import run_claimed
from plugins.framework import Action, Context, Outcome

log = logging.getLogger("penelope.jobs")

INTERRUPTED_ERROR = "job interrupted: the worker stopped before it ended"

# Jobs running on this worker's loop, by id, so a stop can cancel them.
running_tasks: dict[str, asyncio.Task] = {}


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


def create_job(*, job_id: str, page_id: str, plugin: str, params: dict[str, Any], options: JobOptions) -> Job:
    """Insert the running job, or 503 when MAX_JOBS are held."""
    with transaction.atomic():
        if not held_jobs.reserve(lambda: Job.objects.held(time.time()).count()):
            raise ApiError(
                503,
                f"The worker already holds {settings.MAX_JOBS} jobs (MAX_JOBS); "
                "try again when some have ended and been read or delivered.",
                page_id,
            )
        return Job.start(
            id=job_id,
            page_id=page_id,
            plugin=plugin,
            params=json.loads(json.dumps(params, default=str)),
            mode=options.mode,
            ttl=options.ttl,
            callback=options.callback,
            started_at=time.time(),
        )


async def submit(
    *, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None, options: JobOptions
) -> Job:
    """Claim the idle page for a job (409 at once otherwise), store it and
    start it in the background: the stored, running job."""
    job_id = new_job_id()
    claim = await page.try_acquire(lease_id, job_id)
    # Shielded: a client that leaves now must not cut the start in two (a row
    # stored, its run never started, a job `running` until the next restart).
    return await asyncio.shield(spawn(start_job(job_id, claim, action, params, options), about=f"job {job_id}'s start"))


async def start_job(job_id: str, claim: Claim, action: Action, params: dict[str, Any], options: JobOptions) -> Job:
    """Store the job (503 past MAX_JOBS) and start its run; the page is
    released if it cannot start."""
    try:
        job = await on_db_thread(create_job)(
            job_id=job_id, page_id=claim.page.name, plugin=action.route, params=params, options=options
        )
    except BaseException:
        claim.page.release(claim)
        raise
    task = spawn(run_job(job_id, claim, action, params), about=f"job {job_id} on page {claim.page.name}")
    running_tasks[job_id] = task
    task.add_done_callback(lambda _: running_tasks.pop(job_id, None))
    return job


async def run_job(job_id: str, claim: Claim, action: Action, params: dict[str, Any]) -> None:
    """Run the plugin exactly as a plain call would, then keep its answer.

    A worker that stops cancels this task; the job stays `running` in the
    store and the next start marks it interrupted.
    """
    # Files stored during the run are held for the job from the start, for
    # as long as the run and its result may need them; the end sets the real deadline.
    held_until = time.time() + action.time_limit(params) + max(settings.MAX_TTL_S, webhook_window())
    ctx = Context(page_id=claim.page.name, media_holder=job_id, media_held_until=held_until)
    log_row = {"family": action.family, "action": action.name, "page_id": claim.page.name, "job_id": job_id}
    request_log.record_job(**log_row, started_at=time.time())
    try:
        outcome = await run_claimed(claim, action, params, ctx)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("job %s could not run", job_id)
        outcome = Outcome(500, error_body("The job could not run; the details are in the worker's log.", claim.page.name), time.time(), 0)
    request_log.record_job(
        **log_row, status=outcome.status, started_at=outcome.started_at, duration_ms=outcome.duration_s * 1000
    )
    # The page is free again; the answer stays in memory until it is stored,
    # for as long as this worker runs (the database may be locked by another
    # process for a while). Polls meanwhile answer `running`.
    job = await persist(finish_job, job_id, outcome, ctx.media_tokens, what=f"job {job_id}'s end")
    if job is None:
        log.warning("job %s was no longer running when it ended; its answer was not kept", job_id)
        return
    if job.mode == Job.Mode.WEBHOOK:
        signals.webhook_ready.send(sender=job_id)
    else:
        tracker.touch()  # a polling job stops counting: the idle clock starts now


def finish_job(job_id: str, outcome: Outcome, media_tokens: list[str]) -> Job | None:
    """Store a job's answer (running -> done); None if it was not running."""
    with transaction.atomic():
        job = Job.objects.filter(id=job_id).first()
        if job is None:
            return None
        ended = job.finish(status=outcome.status, result=outcome.body, finished_at=time.time(), media_tokens=media_tokens)
        if not ended:
            return None
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
        files = media.drop_rows([job.id])
    media.unlink(files)


# --- counts for the waker ------------------------------------------------------------


def counts() -> tuple[int, int]:
    """(jobs running, webhook jobs waiting for delivery)."""
    return Job.objects.running().count(), Job.objects.webhooks_pending().count()


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
    if counts["interrupted"] or counts["expired"]:
        log.info("recovery: %d jobs interrupted, %d past their deadline deleted", counts["interrupted"], counts["expired"])


def sweep(now: float | None = None) -> dict[str, int]:
    """Delete expired jobs and finished media files."""
    now = now or time.time()
    return {"jobs": drain(discard_expired_batch, now), "files": drain(media.sweep_batch, now)}


async def asweep(now: float | None = None) -> dict[str, int]:
    """`sweep` from the event loop, a batch at a time on the database thread."""
    now = now or time.time()
    return {"jobs": await adrain(discard_expired_batch, now), "files": await adrain(media.sweep_batch, now)}


async def cancel_running() -> None:
    """On stop: cancel the jobs in hand; they stay `running` for recovery."""
    tasks = list(running_tasks.values())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
