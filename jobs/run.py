"""One job's run on this worker: its plugin on the claimed page, its
progress relayed, a client's cancel beside it, and its end stored whatever
happens.

`JobRun.execute` is the whole of it, from the plugin's start to the end in
the store; the job runner (jobs/runner.py) starts it, and hears of the end
through `on_end`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from activity.log import RequestLog
from browser.pages import Claim, ManagedPage
from browser.registry import PageRegistry
from core.api import first_line, refusal
from core.db_thread import persist
from core.errors import ActionFailed, Cancelled, QueueTimedOut, Refusal
from core.events import Bus
from core.runtime import Tasks
from jobs.models import Job, webhook_window
from jobs.options import transient
from jobs.services import end_job, requeue_job
from live.human import Questions
from plugins import debug
from plugins.framework import Action, Context
from plugins.running import Outcome, run_claimed

log = logging.getLogger("penelope.jobs")

CANCELLED_ERROR = "job cancelled by a client"
COULD_NOT_RUN = "The job could not run; the details are in the worker's log."


@dataclass(frozen=True)
class WorkerParts:
    """What the jobs use of their worker's runtime (worker/runtime.py)."""

    pages: PageRegistry  # where a job's attempts take their page
    request_log: RequestLog  # where a job's pair of rows goes
    questions: Questions  # where a job's plugin asks a person (live/human.py)
    bus: Bus  # where a job's events are published
    tasks: Tasks  # where a job's plugin and its notifications run


@dataclass
class JobRun:
    """A job this worker runs now: what a cancel, a poll and a stop need."""

    job: Job
    claim: Claim | None  # None while the job waits in its page's queue
    task: asyncio.Task | None = None  # the run: the plugin, then the end's store
    plugin: asyncio.Task | None = None
    progress: dict[str, Any] | None = None
    # Set when a client cancels: a plain future, which the run waits on beside its plugin.
    cancel_requested: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    # Its outcome is chosen (the plugin's or the cancel's): a cancel is too late.
    decided: bool = False
    # The job as its end was stored: what a long-poll woken by that end answers.
    stored: Job | None = None
    # While it is queued: its position in its line, from 1.
    locate: Callable[[], int | None] | None = None
    # Where its attempts run (None: the line of `any`), and the lease it holds the page under.
    page: ManagedPage | None = None
    lease_id: str | None = None
    # Its last attempt ended transient with attempts left: stored as queued
    # for the next one (X-Retry) rather than ended.
    requeued: bool = False
    # Its plugin's question to a person while it waits for the answer (`human` in polls).
    human: dict[str, Any] | None = None
    # What it uses of its worker: the pages its attempts take, the request log.
    parts: WorkerParts = field(kw_only=True)

    def request_cancel(self) -> bool:
        """Ask the run to stop: its plugin now, or before its next attempt.
        False when its end is already chosen."""
        if self.cancel_requested.done() or (self.decided and not self.job.retries_left):
            return False
        self.cancel_requested.set_result(None)
        return True

    async def end_unrun(self, refused: Refusal) -> Job | None:
        """End the job without its page: its wait ran out, a client cancelled
        it, the lease it waited under is gone. The job as stored, or None."""
        state = Job.State.CANCELLED if isinstance(refused, Cancelled) else (
            Job.State.TIMED_OUT if isinstance(refused, QueueTimedOut) else Job.State.DONE
        )
        self.decided = True
        return await store_end(self.job, failure(refused, self.job.page_id, time.time(), 0.0), [], state, None)

    def shown(self) -> Job:
        """The running job as polls show it: with its latest progress report."""
        self.job.progress = self.progress
        self.job.human = self.human
        return self.job

    async def execute(
        self, action: Action, params: dict[str, Any], *, on_progress: Callable[[JobRun], None],
        on_human: Callable[[JobRun], None],
    ) -> Job | None:
        """Run the plugin exactly as a plain call would, then store its answer,
        or the cancel's when a client cancelled it first: the job as stored,
        or None when its end could not be kept.

        A worker that stops cancels this task; the job stays `running` in the
        store and the next start marks it interrupted.
        """
        job, claim = self.job, self.claim
        self.requeued = False
        # Files stored during the run are held for the job from the start, for
        # as long as the run and its result may need them; the end sets the real deadline.
        held_until = time.time() + action.time_limit(params) + max(settings.MAX_TTL_S, webhook_window())
        relay = ProgressRelay(lambda note: on_progress(self))

        def reported(note: dict[str, Any]) -> None:
            self.progress = note  # a poll shows it at once; the bus hears of it at most ~10 times a second
            relay.report(note)

        def asked(human: dict[str, Any] | None) -> None:
            self.human = human
            on_human(self)

        async def ask_person(reason: str, timeout_s: float) -> str:
            return await self.parts.questions.ask(claim.page, reason, timeout_s, asked)

        ctx = Context(
            page_id=claim.page.name, media_holder=job.id, media_held_until=held_until, on_progress=reported,
            ask_person=ask_person, debug=debug.effective(job.debug), attempt=job.attempt,
            job_id=job.id, on_credential_use=self.parts.request_log.record_credential_use,
        )
        log_row = {"family": action.family, "action": action.name, "page_id": claim.page.name, "job_id": job.id}
        started_at = time.time()
        self.parts.request_log.record_job(**log_row, started_at=started_at)
        plugin = self.plugin = self.parts.tasks.spawn(run_claimed(self.parts.pages, claim, action, params, ctx), about=f"job {job.id}'s plugin {action.route}")
        try:
            cancelled = await self.plugin_ended_or_cancelled(plugin)
        except asyncio.CancelledError:  # the worker stops
            plugin.cancel()
            raise
        finally:
            relay.close()
        self.decided = True
        if cancelled:
            outcome = failure(Cancelled(CANCELLED_ERROR), claim.page.name, started_at, time.time() - started_at)
        elif plugin.cancelled() or plugin.exception() is not None:
            if not plugin.cancelled():
                log.error("job %s could not run", job.id, exc_info=plugin.exception())
            outcome = failure(ActionFailed(COULD_NOT_RUN), claim.page.name, started_at, 0)
        else:
            outcome = plugin.result()
        self.parts.request_log.record_job(
            **log_row, status=outcome.status, started_at=outcome.started_at, duration_ms=outcome.duration_s * 1000
        )
        # The page is free again; the answer stays in memory until it is stored,
        # for as long as this worker runs (the database may be locked by another
        # process for a while). Polls meanwhile answer `running`.
        if not cancelled and job.retries_left and transient(outcome):
            try:
                requeued = await persist(
                    requeue_job, job=copy.copy(job), status=outcome.status, now=time.time(),
                    what=f"job {job.id}'s next attempt",
                )
            except Exception:  # the store refused it: the attempt's end is stored as the job's instead
                log.exception("job %s's next attempt could not be stored; its end is", job.id)
                requeued = None
            if requeued is not None:
                self.job, self.claim, self.requeued, self.decided, self.progress = requeued, None, True, False, None
                return None
        state = Job.State.CANCELLED if cancelled else Job.State.DONE
        self.stored = await store_end(job, outcome, ctx.media_tokens, state, self.progress)
        if self.stored is None:
            log.warning("job %s's answer was not kept: it was no longer running, or could not be stored", job.id)
        return self.stored

    async def plugin_ended_or_cancelled(self, plugin: asyncio.Future) -> bool:
        """Wait for the plugin to end, or for a client's cancel; answers whether
        the job was cancelled. A cancelled plugin gets CANCEL_GRACE_S to stop;
        then its browser page is closed and opened again under the same name
        (its browser calls fail from then on), and the page is free whatever
        the plugin does next."""
        await asyncio.wait({plugin, self.cancel_requested}, return_when=asyncio.FIRST_COMPLETED)
        if plugin.done() or not self.cancel_requested.done():
            # A plugin that ended keeps its outcome, even when a cancel landed in
            # the same turn of the loop: its result is never dropped.
            return False
        plugin.cancel()
        stopped, _ = await asyncio.wait({plugin}, timeout=settings.CANCEL_GRACE_S)
        if not stopped:
            log.warning(
                "job %s's plugin did not stop within %g s of its cancel; its page is reopened",
                self.job.id, settings.CANCEL_GRACE_S,
            )
            try:
                await self.parts.pages.reopen_tab(self.claim.page)
            finally:
                self.parts.pages.broker.release(self.claim)
        return True


def failure(error: Refusal, page_id: str, started_at: float, duration_s: float) -> Outcome:
    """A job's outcome that no plugin answered: the refusal's status and envelope."""
    return Outcome.refused(error, page_id, started_at, duration_s)


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
    end = {"state": state, "status": outcome.status, "result": outcome.body, "media_tokens": media_tokens}
    try:
        return await persist(end_job, job=copy.copy(job), **end, progress=progress, what=what)
    except Exception as error:
        log.exception("%s could not be stored; a 500 that says why is stored instead", what)
        reason = f"{type(error).__name__}: {first_line(str(error))}"
        stored_instead = refusal(
            ActionFailed(f"The job's answer could not be stored ({reason}); the details are in the worker's log."),
            job.page_id,
        )
    end.update(state=Job.State.DONE, status=stored_instead.status, result=stored_instead.envelope())
    try:
        return await persist(end_job, job=copy.copy(job), **end, progress=progress, what=what)
    except Exception:
        log.exception("%s could not be stored as a 500 either; it stays running until the next start", what)
        return None


# About ten progress events a second per job, whatever the plugin reports.
PROGRESS_EVERY_S = 0.1


class ProgressRelay:
    """A running job's progress: the plugin's last report, kept in memory and
    passed on to the event bus at most every PROGRESS_EVERY_S.

    A plugin may report as often as it likes (each report costs a dict and, at
    most once per interval, a timer): the newest report always reaches the
    bus, the ones in between are folded into it. Polls read the newest report
    at once."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send
        self.last: dict[str, Any] | None = None
        self._sent_at = float("-inf")  # time.monotonic() of the last send
        self._timer: asyncio.TimerHandle | None = None

    def report(self, note: dict[str, Any]) -> None:
        """A report from the plugin (the context validated it)."""
        self.last = note
        if self._timer is not None:
            return  # a send is already due; it takes this report
        wait = self._sent_at + PROGRESS_EVERY_S - time.monotonic()
        if wait <= 0:
            self._flush()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        self._sent_at = time.monotonic()
        if self.last is not None:
            self.send(self.last)

    def close(self) -> None:
        """The job ended: its end carries the last report, so nothing more is sent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
