"""`X-Notify-Url`: a signed notification when a job's plugin asks a person.

The body is a Standard Webhooks message, `{"type": "job.needs_human",
"timestamp", "data"}`, whose `data` is the job as its poll shows it at that
moment (with `human`: the reason and the live link). It is signed both ways a
webhook job's end is (`X-Penelope-Signature` with the key, `webhook-*` with
WEBHOOK_SECRET), goes through the same guard (WEBHOOK_REFUSE_PRIVATE) and
is tried NOTIFY_ATTEMPTS times, a few seconds apart, while the question
waits. It is not stored: a question does not outlive the worker either.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import UTC, datetime

import httpx
from django.conf import settings

from core.auth import signing_key
from core.events import Event
from core.runtime import Tasks
from jobs.delivery import USER_AGENT, classify, url_for_log, webhook_client
from jobs.models import DeliveryAttempt, Job
from jobs.shapes import job_body
from jobs.webhooks import CallbackRefused, CallbackUnresolved, pinned_request, sign, standard_headers

log = logging.getLogger("penelope.jobs")

NOTIFY_ATTEMPTS = 3
NOTIFY_PAUSE_S = 2.0  # before the second attempt; doubled before the third


def notify_needs_human(job: Job, tasks: Tasks) -> None:
    """Send the notification in the background (the plugin does not wait for it)."""
    now = time.time()
    body = json.dumps({
        "type": Event.JOB_NEEDS_HUMAN.value,
        "timestamp": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "data": job_body(job, now),
    }, separators=(",", ":")).encode()
    message_id = f"{job.id}-human-{int(job.human['asked_at'] * 1000)}"
    tasks.spawn(send(job.notify_url, message_id, job.id, body), about=f"job {job.id}'s needs_human notification")


async def send(url: str, message_id: str, job_id: str, body: bytes) -> bool:
    """POST it until a 2xx, a final refusal or NOTIFY_ATTEMPTS; whether it arrived."""
    pause = NOTIFY_PAUSE_S
    async with webhook_client() as client:
        for attempt in range(1, NOTIFY_ATTEMPTS + 1):
            outcome = await post_once(client, url, message_id, job_id, body)
            log.info("job %s's needs_human notification to %s, attempt %d: %s", job_id, url_for_log(url), attempt, outcome)
            if outcome != DeliveryAttempt.Outcome.RETRY:
                return outcome == DeliveryAttempt.Outcome.DELIVERED
            if attempt < NOTIFY_ATTEMPTS:
                await asyncio.sleep(pause)
                pause *= 2
    return False


async def post_once(client: httpx.AsyncClient, url: str, message_id: str, job_id: str, body: bytes) -> str:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Penelope-Job": job_id,
        "X-Penelope-Signature": sign(body, signing_key()),
        **standard_headers(message_id, body, settings.WEBHOOK_SECRET, time.time()),
    }
    target, extensions = url, {}
    try:
        async with asyncio.timeout(settings.WEBHOOK_TIMEOUT_S):
            if settings.WEBHOOK_REFUSE_PRIVATE:
                target, host_header, extensions = await pinned_request(url)
                headers.update(host_header)
            # The answer's status is all that counts: its body is not read.
            async with client.stream("POST", target, content=body, headers=headers, extensions=extensions) as response:
                return classify(response.status_code)
    except CallbackRefused:
        return DeliveryAttempt.Outcome.GAVE_UP
    except (CallbackUnresolved, TimeoutError, httpx.HTTPError):
        return DeliveryAttempt.Outcome.RETRY
