"""A job's plugin asks a person (`asked`): the question is published on the
bus, and with `X-Notify-Url` sent as a signed notification.

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
from typing import TYPE_CHECKING

from core.auth import url_for_log
from core.events import Event
from core.runtime import Tasks
from jobs import webhooks
from jobs.models import DeliveryAttempt, Job
from jobs.shapes import job_body, publish

if TYPE_CHECKING:
    from jobs.run import JobRun

log = logging.getLogger("penelope.jobs")

NOTIFY_ATTEMPTS = 3
NOTIFY_PAUSE_S = 2.0  # before the second attempt; doubled before the third


def asked(run: JobRun) -> None:
    """Its plugin asks a person (`run.human`), or the question ended: both are published."""
    publish(run.parts.bus, Event.JOB_NEEDS_HUMAN if run.human else Event.JOB_PROGRESS, run.shown())
    if run.human and run.job.notify_url:
        notify_needs_human(run.job, run.parts.tasks)


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
    async with webhooks.webhook_client() as client:
        for attempt in range(1, NOTIFY_ATTEMPTS + 1):
            sent = await webhooks.send(client, url, body, job_id=job_id, message_id=message_id, headers={})
            outcome = sent.outcome
            log.info("job %s's needs_human notification to %s, attempt %d: %s", job_id, url_for_log(url), attempt, outcome)
            if outcome != DeliveryAttempt.Outcome.RETRY:
                return outcome == DeliveryAttempt.Outcome.DELIVERED
            if attempt < NOTIFY_ATTEMPTS:
                await asyncio.sleep(pause)
                pause *= 2
    return False

