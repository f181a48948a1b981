"""Webhook delivery: POST an ended job to its callback at its scheduled
attempts (each POST is jobs/webhooks.py's `send`, which sorts its answer).

Each attempt is claimed in the database by one deliverer (the worker's, or a
`deliver_webhooks` process), its owner (`Owner`, below). The claim lasts while
the owner lives, and only the owner records the attempt's outcome (each record
is a compare-and-set on the claim). The one way an attempt reaches a receiver
twice is its deliverer dying between the POST and the record: another
deliverer then sends the same attempt again, with the same `X-Penelope-Job`
and `X-Penelope-Attempt`.

Every deliverer is an `Owner`: a random id and an exclusive flock on
`store/deliverers/<id>.lock`, held for as long as the deliverer runs. The
kernel keeps that lock for the life of the process and drops it when the
process ends, however it ends, so "the owner is alive" is a question with an
exact answer: another deliverer takes over a claimed attempt only once it
can take the owner's lock itself.

Why not a heartbeat written to the database: the claims live in SQLite, and
the failure they must survive is SQLite's write lock held by someone else for
a long while. A heartbeat stuck behind that lock looks exactly like a dead
owner, and the attempt would go out twice. The life lock cannot be starved
that way, costs no writes, and needs no clock. All deliverers of a store run
on the store's host (SQLite needs a local file system), where flock works.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings
from django.db import transaction

from core import metrics, store_lock
from core.auth import url_for_log
from core.db_thread import on_db_thread, persist
from core.events import Bus, Event
from core.runtime import Tasks, Tracker
from jobs.models import DeliveryAttempt, Job, webhook_window
from jobs.selectors import seconds_until_next_attempt
from jobs.shapes import job_body
from jobs.webhooks import send, webhook_client
from media_store import store as media

log = logging.getLogger("penelope.webhooks")


OWNER_ID_LENGTH = 24


def owners_dir() -> Path:
    directory = settings.STORE_DIR / "deliverers"
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def lock_path(owner_id: str) -> Path:
    return owners_dir() / f"{owner_id}.lock"


class Owner:
    """This process's deliverer identity; alive from `start()` to `stop()`."""

    def __init__(self) -> None:
        self.id = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._fd: int | None = None

    def start(self) -> Owner:
        # Locked under a name nobody looks at, then renamed into place: no
        # other deliverer ever sees this owner's lock file unlocked.
        path = lock_path(self.id)
        fresh = path.with_name(path.name + ".new")
        fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(fresh, path)
        self._fd = fd
        remove_dead_owners()
        return self

    def stop(self) -> None:
        """Give up every claim at once: another deliverer may take them now."""
        if self._fd is None:
            return
        lock_path(self.id).unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def is_alive(owner_id: str) -> bool:
    """Whether the deliverer `owner_id` still runs: its life lock is held.

    Trying the lock takes it for a moment when the owner is dead; that is
    harmless, as an owner id is never used again."""
    if not owner_id or "/" in owner_id or len(owner_id) > OWNER_ID_LENGTH + 8:
        return False
    return store_lock.is_held(lock_path(owner_id))


def dead(owner_ids: Iterable[str]) -> list[str]:
    return [owner_id for owner_id in owner_ids if not is_alive(owner_id)]


def remove_dead_owners() -> int:
    """Delete the lock files of deliverers that have ended (their claims, if
    any, stay takeable: a missing lock is a dead owner)."""
    removed = 0
    for entry in owners_dir().glob("*.lock"):
        owner_id = entry.name.removesuffix(".lock")
        if not is_alive(owner_id):
            entry.unlink(missing_ok=True)
            removed += 1
    return removed


@dataclass(frozen=True)
class Attempt:
    job_id: str
    page_id: str
    url: str
    number: int
    body: bytes
    finished_at: float | None = None  # the job's end: a delivery's latency runs from it


def claim_due_attempts(owner: str, now: float, limit: int = 50) -> list[Attempt]:
    """Claim for `owner` the attempts due now, each with the body it will send:
    unclaimed ones, and ones whose owner has ended without recording them."""
    due = Job.objects.due_for_delivery(now)
    takeable = due.takeable(dead(due.claim_owners_besides(owner)))
    attempts = []
    with transaction.atomic():
        for job in takeable[:limit]:
            number = job.claim_attempt(owner=owner, now=now)
            if number is None:
                continue  # another deliverer took it first
            body = json.dumps(job_body(job, now), separators=(",", ":")).encode()
            attempts.append(Attempt(job.id, job.page_id, job.callback, number, body, job.finished_at))
    return attempts


def claim_round(owner: str, now: float, limit: int) -> tuple[list[Attempt], float | None]:
    """A deliverer's round in one trip to the database thread: the attempts
    due now claimed for `owner` (at most `limit`, none when it has no room),
    then how long until the next unclaimed one comes due."""
    attempts = claim_due_attempts(owner, now, limit) if limit > 0 else []
    return attempts, seconds_until_next_attempt(time.time())


def record_outcome(
    attempt: Attempt,
    *,
    owner: str,
    started_at: float,
    duration_ms: float,
    status_code: int | None,
    error: str | None,
    outcome: str,
) -> str:
    """Store the attempt and act on it, if the claim is still `owner`'s: delete
    a delivered job (its media kept MEDIA_AFTER_DELIVERY_S more), free it for
    the next slot, or give up (job and media deleted now). Answers the final
    outcome."""
    dropped: list[str] = []
    with transaction.atomic():
        job = Job.objects.with_id(attempt.job_id)
        if job is None or job.claim_owner != owner:
            # Deleted meanwhile (an operator's sweep past its deadline): the
            # POST is logged as it went, nothing else is left to act on.
            log.warning(
                "webhook %s attempt %d: the job was gone, or no longer this deliverer's, when its outcome came",
                attempt.job_id,
                attempt.number,
            )
        elif outcome == DeliveryAttempt.Outcome.DELIVERED:
            if job.record_final(owner=owner):
                media.expire(job.id, until=time.time() + settings.MEDIA_AFTER_DELIVERY_S)
        elif outcome == DeliveryAttempt.Outcome.RETRY and job.record_retry(owner=owner, error=error or f"HTTP {status_code}"):
            pass
        else:
            outcome = DeliveryAttempt.Outcome.GAVE_UP
            if job.record_final(owner=owner):
                dropped = media.drop_rows([job.id])
        DeliveryAttempt.objects.create(
            job_id=attempt.job_id,
            number=attempt.number,
            url=attempt.url,
            started_at=started_at,
            duration_ms=duration_ms,
            status_code=status_code,
            outcome=outcome,
            error=error,
            # Kept no longer than its job could be: the end of its webhook window.
            expires_at=(attempt.finished_at or started_at) + webhook_window(),
        )
    media.unlink(dropped)
    return outcome


async def post(client: httpx.AsyncClient, attempt: Attempt, owner: str) -> str:
    """Send one attempt and record how it ended (for as long as it takes: a
    locked database delays the record, and the claim stays `owner`'s)."""
    sent = await send(
        client, attempt.url, attempt.body, job_id=attempt.job_id, message_id=attempt.job_id,
        headers={"X-Penelope-Attempt": str(attempt.number)},
    )
    outcome = await persist(
        record_outcome,
        attempt,
        owner=owner,
        started_at=sent.started_at,
        duration_ms=sent.duration_ms,
        status_code=sent.status_code,
        error=sent.error,
        outcome=sent.outcome,
        what=f"webhook {attempt.job_id} attempt {attempt.number}'s outcome",
    )
    log.info(
        "webhook %s attempt %d to %s: %s (%s)", attempt.job_id, attempt.number, url_for_log(attempt.url), outcome,
        sent.error or sent.status_code,
    )
    delivered = outcome == DeliveryAttempt.Outcome.DELIVERED and attempt.finished_at is not None
    metrics.webhook_attempt(outcome, sent.duration_ms / 1000, time.time() - attempt.finished_at if delivered else None)
    return outcome


class Deliverer:
    """Sends due attempts as they come due; woken early by the event bus when
    a webhook job ends (`on_event`, which the runtime subscribes to `HEARS`).

    It is one claim owner (`Owner`) from `run_forever`'s start to its
    end. `stop()` ends it after the sends in hand are sent and recorded.
    """

    def __init__(
        self, concurrency: int = 32, idle_wait_s: float | None = None, tracker: Tracker | None = None,
        bus: Bus | None = None, tasks: Tasks | None = None,
    ) -> None:
        self.wake = asyncio.Event()
        # The worker's idle clock, which starts when a job stops counting
        # (delivered or given up), and its bus, which hears that it did;
        # `manage.py deliver_webhooks` has neither.
        self.tracker, self.bus = tracker, bus
        self.tasks = tasks or Tasks()
        self.concurrency = concurrency
        # How often it looks for attempts nobody woke it for: ones another
        # process scheduled, or left behind when its deliverer ended.
        self.idle_wait_s = settings.WEBHOOK_POLL_S if idle_wait_s is None else idle_wait_s
        self.in_flight: set[asyncio.Task] = set()
        self.owner = Owner()
        self.stopping = False

    def notify(self) -> None:
        self.wake.set()

    def on_event(self, message: dict[str, object]) -> None:
        if message.get("mode") == Job.Mode.WEBHOOK:
            self.notify()

    # The bus calls `on_event` with these (the runtime subscribes it).
    HEARS = (Event.JOB_ENDED,)

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()

    async def run_once(self, client: httpx.AsyncClient) -> int:
        """Claim what is due now and send it all; answers how many were sent."""
        self.owner.start()
        try:
            attempts = await on_db_thread(claim_due_attempts)(self.owner.id, time.time())
            await asyncio.gather(*(post(client, attempt, self.owner.id) for attempt in attempts))
        finally:
            self.owner.stop()
        return len(attempts)

    async def run_forever(self) -> None:
        self.owner.start()
        try:
            async with webhook_client() as client:
                while not self.stopping:
                    self.wake.clear()
                    delay = await self._dispatch_due(client)
                    wait_s = self.idle_wait_s if delay is None else min(delay, self.idle_wait_s)
                    if wait_s > 0 and not self.stopping:
                        try:
                            async with asyncio.timeout(wait_s):
                                await self.wake.wait()
                        except TimeoutError:
                            pass
                # Stopping: the sends in hand are finished and recorded first.
                await asyncio.gather(*self.in_flight, return_exceptions=True)
        finally:
            for task in self.in_flight:
                task.cancel()
            await asyncio.gather(*self.in_flight, return_exceptions=True)
            # Claims not recorded are free for another deliverer from now on.
            self.owner.stop()

    async def _dispatch_due(self, client: httpx.AsyncClient) -> float | None:
        """Start the due attempts without waiting for them: a slow receiver
        does not hold up the others. Only as many are claimed as can be sent
        at once. Answers how long until the next one comes due."""
        try:
            free = self.concurrency - len(self.in_flight)
            attempts, next_in_s = await on_db_thread(claim_round)(self.owner.id, time.time(), free)
            for attempt in attempts:
                task = self.tasks.spawn(self._send(client, attempt), about=f"webhook {attempt.job_id} attempt {attempt.number}")
                self.in_flight.add(task)
                task.add_done_callback(self.in_flight.discard)
            return next_in_s
        except Exception:
            log.exception("webhook delivery could not claim due attempts; it goes on")
            return self.idle_wait_s

    async def _send(self, client: httpx.AsyncClient, attempt: Attempt) -> None:
        try:
            outcome = await post(client, attempt, self.owner.id)
            if outcome != DeliveryAttempt.Outcome.RETRY:
                self._settled(attempt, outcome)
        finally:
            self.notify()  # a retry, or a free place, may now be the next thing due

    def _settled(self, attempt: Attempt, outcome: str) -> None:
        """The job stops counting (delivered or given up): the idle clock
        starts now, and the bus hears of it."""
        if self.tracker is not None:
            self.tracker.touch()
        if self.bus is not None:
            self.bus.publish(
                Event.JOB_DELIVERED if outcome == DeliveryAttempt.Outcome.DELIVERED else Event.JOB_GAVE_UP,
                page_id=attempt.page_id,
                job_id=attempt.job_id,
                job=lambda: json.loads(attempt.body),  # the job as this attempt POSTed it
                attempt=attempt.number,
            )
