"""Webhook delivery: POST an ended job to its callback at its scheduled attempts.

An answer is sorted by what to do next: delivered (2xx), worth another
attempt (network error, timeout, 429, 5xx) or final (anything else, redirects
included: a redirect is not a delivery). Each attempt is claimed in the
database first, so two deliverers (the worker and a `deliver_webhooks`
command) never send the same attempt twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q

from activity.tracker import tracker
from jobs.callback_guard import CallbackRefused, CallbackUnresolved, pinned_request
from jobs.models import DeliveryAttempt, Job
from jobs.service import discard, job_body
from media_store import store as media

log = logging.getLogger("penelope.webhooks")

# An attempt's claim outlives its timeout a little; a deliverer that died
# mid-attempt leaves the slot to be sent again after it (at least once).
CLAIM_MARGIN_S = 5
USER_AGENT = "Penelope-Webhook/1"
MAX_ANSWER_READ = 64 * 1024


@dataclass(frozen=True)
class Attempt:
    job_id: str
    url: str
    number: int
    body: bytes


def sign(body: bytes, key: str) -> str:
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def claim_due_attempts(now: float, limit: int = 50) -> list[Attempt]:
    """Claim the attempts due now, each with the body it will send."""
    claim_s = settings.WEBHOOK_TIMEOUT_S + CLAIM_MARGIN_S
    attempts = []
    with transaction.atomic():
        for job in Job.objects.due_for_delivery(now)[:limit]:
            number = job.claim_attempt(now, claim_s)
            body = json.dumps(job_body(job, now), separators=(",", ":")).encode()
            attempts.append(Attempt(job.id, job.callback, number, body))
    return attempts


def seconds_until_next_attempt(now: float) -> float | None:
    """How long until an unclaimed attempt comes due (None: nothing pending)."""
    unclaimed = Q(attempt_claimed_until__isnull=True) | Q(attempt_claimed_until__lte=now)
    pending = Job.objects.webhooks_pending().filter(unclaimed, next_attempt_at__isnull=False)
    next_at = pending.order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first()
    return None if next_at is None else max(0.0, next_at - now)


def classify(status: int) -> str:
    if 200 <= status < 300:
        return DeliveryAttempt.Outcome.DELIVERED
    if status == 429 or status >= 500:
        return DeliveryAttempt.Outcome.RETRY
    return DeliveryAttempt.Outcome.GAVE_UP


def record_outcome(
    attempt: Attempt, *, started_at: float, duration_ms: float, status_code: int | None, error: str | None, outcome: str
) -> str:
    """Store the attempt and act on it: delete a delivered job (its media kept
    MEDIA_AFTER_DELIVERY_S more), schedule the next slot, or give up (job and
    media deleted now). Answers the final outcome."""
    with transaction.atomic():
        job = Job.objects.filter(id=attempt.job_id).first()
        if job is not None:
            if outcome == DeliveryAttempt.Outcome.DELIVERED:
                media.expire(job.id, until=time.time() + settings.MEDIA_AFTER_DELIVERY_S)
                job.delete()
            elif outcome == DeliveryAttempt.Outcome.RETRY and job.schedule_retry(error or f"HTTP {status_code}"):
                pass
            else:
                outcome = DeliveryAttempt.Outcome.GAVE_UP
                discard(Job.objects.filter(id=job.id))
        DeliveryAttempt.objects.create(
            job_id=attempt.job_id,
            number=attempt.number,
            url=attempt.url,
            started_at=started_at,
            duration_ms=duration_ms,
            status_code=status_code,
            outcome=outcome,
            error=error,
        )
    return outcome


async def post(client: httpx.AsyncClient, attempt: Attempt) -> str:
    """Send one attempt and record how it ended."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Penelope-Job": attempt.job_id,
        "X-Penelope-Attempt": str(attempt.number),
        "X-Penelope-Signature": sign(attempt.body, settings.PENELOPE_KEY),
    }
    started_at = time.time()
    began = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    url, extensions = attempt.url, {}
    try:
        async with asyncio.timeout(settings.WEBHOOK_TIMEOUT_S):
            if settings.WEBHOOK_REFUSE_PRIVATE:
                url, host_header, extensions = await pinned_request(attempt.url)
                headers.update(host_header)
            async with client.stream(
                "POST", url, content=attempt.body, headers=headers, extensions=extensions
            ) as response:
                status_code = response.status_code
                # The answer must arrive whole (a connection dropped mid-answer
                # is a network error), but a huge one is not read to its end.
                answer_bytes = 0
                async for chunk in response.aiter_raw():
                    answer_bytes += len(chunk)
                    if answer_bytes >= MAX_ANSWER_READ:
                        break
        outcome = classify(status_code)
        if outcome != DeliveryAttempt.Outcome.DELIVERED:
            error = f"the receiver answered HTTP {status_code}"
    except CallbackRefused as refused:
        outcome, error = DeliveryAttempt.Outcome.GAVE_UP, str(refused)
    except CallbackUnresolved as unresolved:
        outcome, error = DeliveryAttempt.Outcome.RETRY, f"network error: {unresolved}"
    except TimeoutError:
        outcome, error = DeliveryAttempt.Outcome.RETRY, f"no answer within {settings.WEBHOOK_TIMEOUT_S:g} s"
    except httpx.HTTPError as failure:
        outcome, error = DeliveryAttempt.Outcome.RETRY, f"network error: {type(failure).__name__}"
    except Exception as failure:  # e.g. a URL httpx cannot send to: no later attempt would do better
        log.warning("webhook %s cannot be sent: %r", attempt.job_id, failure)
        outcome, error = DeliveryAttempt.Outcome.GAVE_UP, f"the callback cannot be sent: {type(failure).__name__}"
    duration_ms = (time.monotonic() - began) * 1000
    outcome = await sync_to_async(record_outcome)(
        attempt, started_at=started_at, duration_ms=duration_ms, status_code=status_code, error=error, outcome=outcome
    )
    log.info("webhook %s attempt %d to %s: %s (%s)", attempt.job_id, attempt.number, attempt.url, outcome, error or status_code)
    if outcome != DeliveryAttempt.Outcome.RETRY:
        tracker.touch()  # the job stops counting: the idle clock starts now
    return outcome


def webhook_client() -> httpx.AsyncClient:
    # trust_env=False: the POST leaves from the host itself, never through a
    # proxy from the environment (and never through the browser's).
    return httpx.AsyncClient(
        trust_env=False,
        follow_redirects=False,
        timeout=settings.WEBHOOK_TIMEOUT_S,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
    )


class Deliverer:
    """Sends due attempts as they come due; woken early when a webhook job ends."""

    def __init__(self, concurrency: int = 32) -> None:
        self.wake = asyncio.Event()
        self.concurrency = concurrency
        self.in_flight: set[asyncio.Task] = set()

    def notify(self) -> None:
        self.wake.set()

    async def run_once(self, client: httpx.AsyncClient) -> int:
        """Claim what is due now and send it all; answers how many were sent."""
        attempts = await sync_to_async(claim_due_attempts)(time.time())
        await asyncio.gather(*(post(client, attempt) for attempt in attempts))
        return len(attempts)

    async def run_forever(self, idle_wait_s: float = 5) -> None:
        async with webhook_client() as client:
            try:
                while True:
                    self.wake.clear()
                    try:
                        await self._dispatch_due(client)
                        delay = await sync_to_async(seconds_until_next_attempt)(time.time())
                    except Exception:
                        log.exception("webhook delivery loop failed; it goes on")
                        delay = idle_wait_s
                    finally:
                        await sync_to_async(close_old_connections)()
                    wait_s = idle_wait_s if delay is None else min(delay, idle_wait_s)
                    if wait_s > 0:
                        try:
                            async with asyncio.timeout(wait_s):
                                await self.wake.wait()
                        except TimeoutError:
                            pass
            finally:
                for task in self.in_flight:
                    task.cancel()
                await asyncio.gather(*self.in_flight, return_exceptions=True)

    async def _dispatch_due(self, client: httpx.AsyncClient) -> None:
        """Start the due attempts without waiting for them: a slow receiver
        does not hold up the others. Only as many are claimed as can be sent
        at once, so no claim lapses while its attempt waits its turn."""
        free = self.concurrency - len(self.in_flight)
        if free <= 0:
            return
        for attempt in await sync_to_async(claim_due_attempts)(time.time(), limit=free):
            task = asyncio.get_running_loop().create_task(self._send(client, attempt))
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)

    async def _send(self, client: httpx.AsyncClient, attempt: Attempt) -> None:
        try:
            await post(client, attempt)
        except Exception:
            log.exception("webhook attempt for job %s failed to run", attempt.job_id)
        self.notify()  # a retry, or a free place, may now be the next thing due
