"""The schedules' loop: a runtime service (worker/setup.py) that starts each
schedule's job at its instants, through the job runner, as a client's
start would.

It sleeps until the earliest instant of the unpaused schedules, to the
millisecond rather than in polling steps, so a fire's job starts a few ms
after its instant; a change through the API or the admin wakes it at once
(`schedules_changed`), and it reads the store every SCHEDULE_CHECK_S anyway
for the changes of `manage.py schedules`, which runs in another process.

A fire moves the schedule on first (`Schedule.claim_fire`, one conditional
UPDATE: an edit in between wins), then decides on the overlap with the
schedule's previous job, then starts the job in a task of its own, so a
`cancel_running` that waits for a plugin to stop holds up no other schedule.
At start, the fires the worker was stopped for are caught up or counted
missed (`rules.catch_up`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from django.conf import settings

from core import metrics
from core.api import refusal
from core.db_thread import on_db_thread
from core.errors import JobNotCancellable, NoSuchAction, Refusal, ScheduleOverlap
from core.events import Bus, Event
from core.routes import ANY
from jobs.models import Job
from jobs.options import DEFAULT_BACKOFF_S, JobOptions
from jobs.runner import JobRunner
from jobs.selectors import find_live_job
from jobs.shapes import job_body
from plugins.framework import find_action
from schedules import rules, timing
from schedules.models import Schedule
from schedules.refusals import RefusalLog
from schedules.selectors import active_schedules, due_schedules, earliest_fire_at
from schedules.services import schedules_changed

log = logging.getLogger("penelope.schedules")


def announce(bus: Bus, event: Event, schedule: Schedule, fire_at: float, job: Job | None = None, **more: Any) -> None:
    """schedule.fired (with its job) or schedule.skipped, on the worker's bus."""
    bus.publish(
        event,
        page_id=job.page_id if job is not None else schedule.page_id,
        job_id=job.id if job is not None else None,
        job=(lambda: job_body(job, time.time())) if job is not None else None,
        detail={"schedule_id": schedule.id, "name": schedule.name, "fire_at": fire_at, **more},
        schedule_id=schedule.id,
    )


class ScheduleFirer:
    """The one owner of the schedules' in-process state: the wake-up, the
    fires in hand (by schedule id), which the loop leaves alone until they
    end, and the refusals not logged yet."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner
        self.wake = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.firing: dict[str, asyncio.Task] = {}
        self.refusals = RefusalLog(settings.SCHEDULE_REFUSAL_LOG_S)

    # --- the loop ------------------------------------------------------------------------------

    def changed(self, **kwargs: Any) -> None:
        """`schedules_changed`'s receiver: from the database thread or an admin
        thread, so the loop is woken through the loop itself."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wake.set)

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        schedules_changed.connect(self.changed, weak=False, dispatch_uid=f"schedule-firer-{id(self)}")
        try:
            try:
                await self.catch_up(time.time())
            except Exception:
                log.exception("the schedules' catch-up failed; the loop goes on")
            while True:
                self.wake.clear()
                held_back = False
                try:
                    held_back = await self.fire_due(time.time())
                    self.refusals.flush()
                    delay = await self.until_next(held_back)
                except Exception:
                    log.exception("a step of the schedules' loop failed; the loop goes on")
                    delay = settings.SCHEDULE_CHECK_S
                if delay > 0:
                    try:
                        async with asyncio.timeout(delay):
                            await self.wake.wait()
                    except TimeoutError:
                        pass
        finally:
            schedules_changed.disconnect(dispatch_uid=f"schedule-firer-{id(self)}")
            self.loop = None

    async def until_next(self, held_back: bool) -> float:
        """Seconds to sleep: until the earliest instant, at most SCHEDULE_CHECK_S.
        A due schedule whose previous fire is still in hand waits for that
        fire's end (which wakes the loop), not in a busy loop."""
        earliest = await on_db_thread(earliest_fire_at)()
        self.runner.tracker.wake_at(earliest)  # a supervisor wakes a sleeping worker for it
        delay = settings.SCHEDULE_CHECK_S
        if earliest is not None:
            delay = min(delay, earliest - time.time())
        return settings.SCHEDULE_CHECK_S if held_back and delay <= 0 else delay

    async def fire_due(self, now: float) -> bool:
        """Fire every schedule due at `now`; whether one was held back (its
        previous fire still in hand)."""
        held_back = False
        for schedule in await on_db_thread(due_schedules)(now=now):
            if schedule.id in self.firing:
                held_back = True
                continue
            if schedule.fire_requested_at is not None:
                if await on_db_thread(schedule.claim_request)():
                    following = timing.next_fire_after(schedule.cron, schedule.timezone, now)
                    self.fire_in_background(schedule, fire_at=now, following=following)
                    continue
            if schedule.paused or schedule.next_fire_at is None or schedule.next_fire_at > now:
                continue
            due = schedule.next_fire_at
            # Late (the loop was held up): this fire goes, the instants since are missed.
            since = await asyncio.to_thread(timing.fires_between, schedule.cron, schedule.timezone, due, now)
            following = timing.next_fire_after(schedule.cron, schedule.timezone, now)
            if not await on_db_thread(schedule.claim_fire)(due=due, next_fire_at=following):
                continue  # changed meanwhile: the next round reads it again
            if len(since) > 1:
                await on_db_thread(schedule.record_late)(count=len(since) - 1)
                metrics.schedule_missed(len(since) - 1)
            self.fire_in_background(schedule, fire_at=due, following=following)
        return held_back

    async def catch_up(self, now: float) -> None:
        """At start: each unpaused schedule whose instant passed while the
        worker was stopped fires its latest missed instant if it is less than
        `catchup_s` old; the other missed instants are counted."""
        for schedule in await on_db_thread(active_schedules)():
            due = schedule.next_fire_at
            if due is None or due > now:
                continue
            plan = await asyncio.to_thread(
                rules.catch_up, cron=schedule.cron, zone=schedule.timezone, due=due, now=now, catchup_s=schedule.catchup_s
            )
            if not await on_db_thread(schedule.record_missed)(count=plan.missed, next_fire_at=plan.next_fire_at, expected=due):
                continue
            if plan.missed:
                metrics.schedule_missed(plan.missed)
                log.info("schedule %s: %d fires missed while the worker was stopped", schedule.name, plan.missed)
            if plan.fire_at is not None:
                self.fire_in_background(schedule, fire_at=plan.fire_at, following=plan.next_fire_at)

    def fire_in_background(self, schedule: Schedule, *, fire_at: float, following: float | None) -> None:
        task = self.runner.parts.tasks.spawn(self.fire_quietly(schedule, fire_at, following), about=f"schedule {schedule.name}'s fire")
        self.firing[schedule.id] = task

        def ended(_: asyncio.Task) -> None:
            if self.firing.get(schedule.id) is task:
                del self.firing[schedule.id]
            self.wake.set()

        task.add_done_callback(ended)

    async def fire_quietly(self, schedule: Schedule, fire_at: float, following: float | None) -> None:
        try:
            await self.fire(schedule, fire_at=fire_at, following=following)
        except Refusal:
            pass  # counted and logged by `fire`

    # --- one fire --------------------------------------------------------------------------------

    async def trigger(self, schedule: Schedule) -> tuple[Job, JobOptions]:
        """`POST /api/v1/schedules/{id}/trigger`: fire now, paused or not,
        with the schedule's overlap; its next instant stays as it was."""
        now = time.time()
        following = timing.next_fire_after(schedule.cron, schedule.timezone, now)
        return await self.fire(schedule, fire_at=now, following=following)

    async def fire(self, schedule: Schedule, *, fire_at: float, following: float | None) -> tuple[Job, JobOptions]:
        """Start the schedule's job for its instant `fire_at`, unless its
        overlap says otherwise (ScheduleOverlap) or the start is refused (the
        refusal, counted on the schedule, is raised)."""
        previous = await self.live_job(schedule.last_job_id)
        decision = rules.overlap_decision(schedule.overlap, previous is not None)
        if decision == rules.SKIP:
            await on_db_thread(schedule.record_skipped)()
            announce(self.runner.parts.bus, Event.SCHEDULE_SKIPPED, schedule, fire_at, previous_job_id=schedule.last_job_id)
            log.info("schedule %s: skipped, job %s still runs (overlap skip)", schedule.name, schedule.last_job_id)
            raise ScheduleOverlap(
                f"Schedule {schedule.name}'s previous job {schedule.last_job_id} is still {previous.state}, "
                "and its overlap is skip: nothing started.",
            )
        if decision == rules.CANCEL_THEN_START:
            try:
                await self.runner.cancel(schedule.last_job_id)
            except JobNotCancellable:
                pass  # it ended on its own meanwhile
        try:
            job, options = await self.start(schedule, fire_at, following)
        except Refusal as refused:
            error = refused.message
            await on_db_thread(schedule.record_refused)(error=error, at=time.time())
            metrics.schedule_refused(refusal(refused).status)
            self.refusals.refused(schedule_id=schedule.id, name=schedule.name, error=error)
            raise
        await on_db_thread(schedule.record_fired)(at=fire_at, job_id=job.id)
        announce(self.runner.parts.bus, Event.SCHEDULE_FIRED, schedule, fire_at, job)
        return job, options

    async def live_job(self, job_id: str | None) -> Job | None:
        """The schedule's previous job while it is queued or running: as this
        worker runs it, else as the store says (after a restart, a job queued
        again may not be back in the runner's hands yet)."""
        if job_id is None:
            return None
        run = self.runner.running.get(job_id)
        if run is not None:
            return run.job if run.stored is None else None
        stored = await on_db_thread(find_live_job)(job_id=job_id, now=time.time())
        return stored if stored is not None and not stored.ended else None

    async def start(self, schedule: Schedule, fire_at: float, following: float | None) -> tuple[Job, JobOptions]:
        """The job start itself: the plugin's route, parameters and page as a
        client's start would give them, the schedule's job headers."""
        family, _, name = schedule.plugin.partition("/")
        action = find_action(family, name)
        if action is None:
            raise NoSuchAction(f"No plugin action {schedule.plugin}.", schedule.page_id)
        params = action.validate(schedule.params)
        page = None if schedule.page_id == ANY else self.runner.pages.get(schedule.page_id)
        options = JobOptions(
            ttl=schedule.result_ttl,
            callback=schedule.callback_url,
            queue_timeout=rules.fire_queue_timeout(schedule.queue_timeout, fire_at, following),
            priority=schedule.priority,
            retries=schedule.retry,
            retry_backoff=schedule.retry_backoff if schedule.retry else DEFAULT_BACKOFF_S,
            schedule_id=schedule.id,
        )
        job = await self.runner.submit(page=page, action=action, params=params, lease_id=None, options=options)
        return job, options
