"""What the event log (core/event_log.py) costs the job path, in-process:
a job start publishes `page.busy` and `job.started`, an end `page.idle` and
`job.ended`. A page event and a job event are timed through `Bus.publish`
on a running loop with no event socket connected, the log on (EVENT_LOG_KEEP)
and off, and the flush that writes them, per event, on the database thread
(issue 56).

    .venv/bin/python -m bench.event_log_cost [--events 4000] [--rounds 5]

Medians of `--rounds` runs of `--events` publishes each. The store is a
fresh one in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

os.environ["PENELOPE_STORE"] = tempfile.mkdtemp(prefix="event-log-cost-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")

import django  # noqa: E402  (after the store is chosen: the settings read it)

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from core.db_thread import run_on_db_thread  # noqa: E402
from core.events import Bus, Event  # noqa: E402
from jobs.models import Job  # noqa: E402
from jobs.shapes import publish  # noqa: E402

# Events published between two flushes: what a busy worker publishes in the
# log's FLUSH_S, so the queue of rows stays as small as it is in a worker.
CHUNK = 50


def a_job() -> Job:
    now = time.time()
    return Job(
        id="00000000000000aa",
        page_id="main",
        plugin="web/state",
        mode="poll",
        ttl=60,
        accepted_at=now,
        started_at=now,
        state="done",
        finished_at=now,
        expires_at=now + 60,
        status=200,
        result={"success": True, "page_id": "main", "url": "https://example.test/", "title": "A page"},
    )


async def publish_cost(events: int) -> tuple[float, float, float | None]:
    """µs `publish` costs a page event and a job event (rendered as a poll
    shows the job), and the flush an event; none flushed with the log off."""
    bus = Bus()
    if bus.log.keeps:
        await bus.log.open()
    job = a_job()
    page = ended = flushed = 0.0
    for _ in range(events // CHUNK):
        began = time.perf_counter()
        for _ in range(CHUNK):
            bus.publish(Event.PAGE_BUSY, page_id="main", job_id=job.id)
        page += time.perf_counter() - began
        began = time.perf_counter()
        for _ in range(CHUNK):
            publish(bus, Event.JOB_ENDED, job)
        ended += time.perf_counter() - began
        if bus.log.keeps:
            began = time.perf_counter()
            await bus.log.flush()
            flushed += time.perf_counter() - began
    if not bus.log.keeps:
        return page * 1e6 / events, ended * 1e6 / events, None
    return page * 1e6 / events, ended * 1e6 / events, flushed * 1e6 / (2 * events)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    run_on_db_thread(call_command, "migrate", verbosity=0)
    for keep in (0, 10_000):
        settings.EVENT_LOG_KEEP = keep
        runs = [asyncio.run(publish_cost(args.events)) for _ in range(args.rounds)]
        page, job = (statistics.median(run[index] for run in runs) for index in (0, 1))
        line = f"EVENT_LOG_KEEP={keep}: publish a page event {page:.1f} µs, a job event {job:.1f} µs"
        if keep:
            line += f"; the flush {statistics.median(run[2] for run in runs):.1f} µs an event (database thread)"
        print(line + f" (medians of {args.rounds} runs of {args.events})")


if __name__ == "__main__":
    main()
