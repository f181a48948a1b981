"""Changes of the job store: synchronous, each one transaction at most.

Each service names what it does, takes keyword arguments and answers the
model as stored; a refusal is a domain error (core/errors.py). The state
changes themselves are `Job` methods (one conditional UPDATE each) and every
query is a `JobQuerySet` method. The worker calls these on its database
thread; the commands and the in-process tests call them as they are.

Recovery and sweeps run in batches of BATCH_ROWS, one short transaction
each, with the files unlinked after the commit that drops their rows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from core import metrics
from core.api import refusal
from core.db_thread import BATCH_ROWS, adrain, drain
from core.errors import Interrupted, JobsFull, JobStillRunning, NoSuchJob
from core.event_log import SWEEP_ROWS, forget_jobs_batch, sweep_events_batch
from core.routes import ANY
from jobs.models import DeliveryAttempt, Job
from jobs.options import JobOptions, back_off_s, wait_in_line_s
from jobs.selectors import count_held, find_live_job, seconds_until_a_result_lapses
from media_store import store as media

log = logging.getLogger("penelope.jobs")

INTERRUPTED_ERROR = "job interrupted: the worker stopped before it ended"
NO_SUCH_JOB = "No such job: the id is unknown, or its result was delivered or has expired."


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

    @property
    def bound(self) -> int | None:
        return self._bound

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


# Retry-After of a 503 for MAX_JOBS (whole seconds): when the first held
# result passes its deadline and leaves room by itself, between 1 and
# JOBS_FULL_RETRY_MAX_S (a client that reads and deletes its results, or a
# delivered webhook, makes room sooner); JOBS_FULL_RETRY_S when every held
# job is still queued or running, whose ends nobody knows.
JOBS_FULL_RETRY_S = 5
JOBS_FULL_RETRY_MAX_S = 60


def jobs_full_retry_after_s(room_in_s: float | None) -> int:
    if room_in_s is None:
        return JOBS_FULL_RETRY_S
    return max(1, min(JOBS_FULL_RETRY_MAX_S, math.ceil(room_in_s)))


def create_job(
    *, job_id: str, page_id: str, plugin: str, params: dict[str, Any], options: JobOptions, held: HeldJobsBound,
    digest: str | None = None, queued: bool = False, under_lease: bool = False, on_any: bool = False,
    family_version: str | None = None,
) -> Job:
    """Insert the running job, or the queued one (its page busy, with
    X-Queue-Timeout), accepted now; JobsFull when MAX_JOBS are held. A
    running job starts now too; a queued one when it takes its page."""
    if not held.reserve(lambda: count_held(time.time())):
        raise JobsFull(
            f"The worker already holds {settings.MAX_JOBS} jobs (MAX_JOBS); "
            "try again when some have ended and been read or delivered.",
            page_id,
            retry_after_s=jobs_full_retry_after_s(seconds_until_a_result_lapses(time.time())),
        )
    now = time.time()
    fields = {
        "id": job_id,
        "page_id": page_id,
        "plugin": plugin,
        "params": json.loads(json.dumps(params, default=str)),
        "mode": options.mode,
        "ttl": options.ttl,
        "callback": options.callback,
        "accepted_at": now,
        "started_at": None if queued else now,
        "attempt_started_at": None if queued else now,
        "idempotency_key": options.idempotency_key,
        "request_digest": digest,
        "under_lease": under_lease,
        "queue_timeout": options.queue_timeout,
        "on_any": on_any,
        "rerun_of": options.rerun_of,
        "schedule_id": options.schedule_id,
        "notify_url": options.notify,
        "debug": options.debug,
        "family_version": family_version,
        "priority": options.priority,
    }
    if options.retries:
        fields.update(retries=options.retries, retry_backoff=options.retry_backoff)
    if queued:
        fields.update(
            state=Job.State.QUEUED, enqueued_at=now, queue_deadline=now + options.queue_timeout,
        )
    if options.idempotency_key is None:
        return Job.start(**fields)  # one INSERT, committed on its own
    with transaction.atomic():
        # A job past its deadline that the sweep has not reached yet gives its key up.
        Job.objects.with_key(options.idempotency_key).update(idempotency_key=None)
        return Job.start(**fields)


def end_job(
    *, job: Job, state: str, status: int, result: dict[str, Any], media_tokens: list[str],
    progress: dict[str, Any] | None,
) -> Job | None:
    """Store a job's answer (running -> done, or cancelled) and answer the job
    as stored; None if it was no longer running (or gone). Without files it
    is one conditional UPDATE, committed on its own; with files, their hold
    moves in the same transaction."""
    with transaction.atomic() if media_tokens or job.media_tokens else contextlib.nullcontext():
        ended = job.finish(
            state=state, status=status, result=result, finished_at=time.time(), media_tokens=media_tokens,
            progress=progress,
        )
        if not ended:
            return None
        if job.media_tokens:
            # Every file the run stored (held for it since its put) is now
            # held until the job's own deadline.
            media.expire(job.id, until=job.expires_at)
    return job


def requeue_job(*, job: Job, status: int, now: float) -> Job | None:
    """An attempt ended with a transient failure and attempts remain
    (X-Retry): the job waits out its back-off, then its turn in its page's
    line (the line of `any` for a job sent there). None if it was no longer
    running."""
    retry_at = now + back_off_s(job.retry_backoff, job.attempt)
    moved = job.requeue(
        status=status, finished_at=now, retry_at=retry_at, queue_deadline=retry_at + wait_in_line_s(job.queue_timeout),
        page_id=ANY if job.on_any else job.page_id,
    )
    return job if moved else None


def begin_job(*, job: Job, now: float, page_id: str, family_version: str | None = None) -> bool:
    """A queued job took its page (for a job sent to `any`, the page it got):
    its attempt runs from now, with the family's code of now (False: it was
    no longer queued). Its first attempt's start is the job's `started_at`."""
    return job.begin(now=now, page_id=page_id, family_version=family_version)


def forget_job(*, job_id: str, now: float) -> None:
    """An ended job and its media go now, freeing its MAX_JOBS place and its
    disk; NoSuchJob, or JobStillRunning while it runs. The files are unlinked
    after the commit that drops their rows."""
    with transaction.atomic():
        job = find_live_job(job_id=job_id, now=now)
        if job is None:
            raise NoSuchJob(NO_SUCH_JOB)
        if not job.forget():
            raise JobStillRunning(f"Job {job_id} is still {job.state}; cancel it first.", job.page_id)
        DeliveryAttempt.objects.of_job(job.id).delete()  # its history goes with it
        files = media.drop_rows([job.id])
    media.unlink(files)


# --- recovery and sweeps ------------------------------------------------------------


def requeue_batch(now: float) -> int:
    """One batch of recovery for the running jobs with attempts left (X-Retry,
    no lease): queued again for their next attempt, the stop counted as a
    transient failure (their plugin may have half-run: the client opted in)."""
    with transaction.atomic():
        jobs = list(Job.objects.running().retryable()[:BATCH_ROWS])
        for job in jobs:
            requeue_job(job=job, status=refusal(Interrupted(INTERRUPTED_ERROR)).status, now=now)
    return len(jobs)


def interrupt_batch(now: float) -> int:
    """One batch of recovery: running jobs become interrupted, ended now."""
    with transaction.atomic():
        jobs = list(Job.objects.running()[:BATCH_ROWS])
        held_until: dict[float, list[str]] = {}  # a few distinct deadlines: one media update each
        for job in jobs:
            answer = refusal(Interrupted(INTERRUPTED_ERROR, job.page_id))
            if job.interrupt(now=now, status=answer.status, result=answer.envelope()):
                held_until.setdefault(job.expires_at, []).append(job.id)
        for until, holders in held_until.items():
            media.expire_all(holders, until=until)
    return len(jobs)


def discard_expired_batch(now: float) -> int:
    """One batch of jobs past their deadline, deleted with their media."""
    with transaction.atomic():
        ids = Job.objects.expired(now).ids(BATCH_ROWS)
        files = media.drop_rows(ids)
        Job.objects.with_ids(ids).delete()
    media.unlink(files)
    return len(ids)


def discard_expired_attempts_batch(now: float) -> int:
    """One batch of delivery attempts past their job's webhook window."""
    ids = DeliveryAttempt.objects.expired(now).ids(BATCH_ROWS)
    DeliveryAttempt.objects.with_ids(ids).delete()
    return len(ids)


def recover(now: float | None = None) -> dict[str, int]:
    """At start, before requests: every running job becomes interrupted and
    ended now; jobs past their deadline go without a last try."""
    now = now or time.time()
    counts = {
        "retried": drain(requeue_batch, now), "interrupted": drain(interrupt_batch, now),
        "expired": drain(discard_expired_batch, now),
    }
    log_recovery(counts)
    return counts


async def arecover(now: float | None = None) -> dict[str, int]:
    """`recover` from the event loop, a batch at a time on the database thread."""
    now = now or time.time()
    counts = {
        "retried": await adrain(requeue_batch, now), "interrupted": await adrain(interrupt_batch, now),
        "expired": await adrain(discard_expired_batch, now),
    }
    log_recovery(counts)
    return counts


def log_recovery(counts: dict[str, int]) -> None:
    metrics.jobs_interrupted(counts["interrupted"])
    metrics.jobs_retried("interrupted", counts["retried"])
    if any(counts.values()):
        log.info(
            "recovery: %d jobs interrupted, %d queued again for their next attempt (X-Retry), %d past their deadline deleted",
            counts["interrupted"], counts["retried"], counts["expired"],
        )


def forget_deleted_jobs_events_batch(now: float) -> int:
    """One batch of kept events whose job is deleted: the event log keeps no
    copy of a job the store no longer holds (core/event_log.py)."""
    return forget_jobs_batch(Job.objects.held(now).values("id"))


def sweep(now: float | None = None) -> dict[str, int]:
    """Delete expired jobs, finished media files, expired delivery attempts,
    the events past the event log's window and the deleted jobs' copies in it."""
    now = now or time.time()
    return {
        "jobs": drain(discard_expired_batch, now),
        "files": drain(media.sweep_batch, now),
        "attempts": drain(discard_expired_attempts_batch, now),
        "events": drain(sweep_events_batch, now),
        "events of deleted jobs": drain(forget_deleted_jobs_events_batch, now),
    }


async def asweep(now: float | None = None) -> dict[str, int]:
    """`sweep` from the event loop, a batch at a time on the database thread."""
    now = now or time.time()
    return {
        "jobs": await adrain(discard_expired_batch, now),
        "files": await adrain(media.sweep_batch, now),
        "attempts": await adrain(discard_expired_attempts_batch, now),
        "events": await adrain(sweep_events_batch, now, full=SWEEP_ROWS),
        "events of deleted jobs": await adrain(forget_deleted_jobs_events_batch, now, full=SWEEP_ROWS),
    }

