"""Publishes what a job's clients hear besides its poll: its events on the
bus, and the notification its plugin's question sends (jobs/notify.py)."""

from __future__ import annotations

import time
from typing import Any

from core.events import Bus, Event
from jobs.models import Job
from jobs.notify import notify_needs_human
from jobs.run import JobRun
from jobs.shapes import job_body


def asked(run: JobRun) -> None:
    """Its plugin asks a person (`run.human`), or the question ended: both are published."""
    publish(run.parts.bus, Event.JOB_NEEDS_HUMAN if run.human else Event.JOB_PROGRESS, run.shown())
    if run.human and run.job.notify_url:
        notify_needs_human(run.job, run.parts.tasks)


def publish(bus: Bus, event: Event, job: Job, **fields: Any) -> None:
    """The job's event on its worker's bus; a socket gets the job as a poll shows it."""
    bus.publish(
        event, page_id=job.page_id, job_id=job.id, job=lambda: job_body(job, time.time()), state=job.state,
        mode=job.mode, **fields,
    )
