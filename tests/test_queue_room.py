"""A full queue's Retry-After (jobs/queueing.py, `JobQueue.retry_after_s`),
in-process on pages without a browser (tests/support/broker_pages.py): the
time until the queue has room, from the job running on the page and the
jobs queued for it. tests/test_queue.py checks the header on a real worker."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from core.errors import QueueFull
from core.routes import ANY
from jobs.models import Job
from jobs.queueing import JobQueue
from jobs.run import JobRun
from tests.support.broker_pages import Pages
from worker.runtime import Runtime


def refused_after(queue: JobQueue, page) -> int:
    with pytest.raises(QueueFull) as refused:
        queue.take_room(page)
    return refused.value.retry_after_s


async def running_for(pages: Pages, running: dict, page_id: str, job_id: str, seconds: float) -> None:
    """A job that has run `seconds` on the page so far, as the runner lists it."""
    claim = await pages.broker.take_now(page_id, job_id=job_id)
    job = Job(id=job_id, page_id=page_id, plugin="testing/sleep", mode=Job.Mode.POLL, started_at=time.time() - seconds)
    running[job_id] = JobRun(job=job, claim=claim, parts=Runtime().jobs.parts)  # parts: unread here


async def test_retry_after_is_what_the_running_job_has_left_then_a_run_per_job_past_the_bound():
    pages, running = Pages("main"), {}
    queue = JobQueue(pages, running)
    queue.ran("main", 10.0)  # the page's recent run time
    await running_for(pages, running, "main", "a" * 16, 4.0)
    with override_settings(QUEUE_MAX=2):
        pages.broker.join("main", job_id="q1")
        pages.broker.join("main", job_id="q2")
        # The first in line leaves for the page when the running job ends: 10 - 4 s from now.
        assert refused_after(queue, pages.pages["main"]) == 6
        # One more than the bound (a retry back from its back-off): another run before there is room.
        extra = pages.broker.join("main", job_id="q3")
        assert refused_after(queue, pages.pages["main"]) == 6 + 10
        # A job past the page's run time may end any moment: none left of it, and at least 1 s in all.
        running["a" * 16].job.started_at -= 100
        assert refused_after(queue, pages.pages["main"]) == 10
        pages.broker.leave(extra)
        assert refused_after(queue, pages.pages["main"]) == 1


async def test_retry_after_for_a_page_held_by_a_plain_call_is_one_run_time():
    pages = Pages("main")
    queue = JobQueue(pages, {})
    queue.ran("main", 3.2)
    await pages.broker.acquire("main", wait_s=None)  # a plain call: when it started is not kept
    with override_settings(QUEUE_MAX=1):
        pages.broker.join("main", job_id="q1")
        assert refused_after(queue, pages.pages["main"]) == 4


async def test_retry_after_for_any_is_the_first_page_to_be_free():
    pages, running = Pages("main", "p1"), {}
    queue = JobQueue(pages, running)
    queue.ran("main", 20.0)
    queue.ran("p1", 20.0)
    await running_for(pages, running, "main", "b" * 16, 5.0)
    await running_for(pages, running, "p1", "c" * 16, 12.0)
    with override_settings(QUEUE_MAX=1, MAX_PAGES=2):
        pages.broker.join(ANY, job_id="q1")
        assert refused_after(queue, None) == 8  # p1's job ends first
        pages.broker.join(ANY, job_id="q2")
        assert refused_after(queue, None) == 8 + 10  # two pages share the next job's 20 s
