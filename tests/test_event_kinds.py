"""The bus in-process: a listener hears only the kinds it names, in the
order they were published, and no published event is a task nobody holds."""

from __future__ import annotations

import asyncio

from core import events, tasks
from core.events import Event


async def test_a_listener_hears_only_its_kinds_in_order():
    heard: list[dict] = []
    last = asyncio.Event()

    def on_event(message: dict) -> None:
        heard.append(message)
        if message["job_id"] == "last":
            last.set()

    ready = asyncio.Event()
    listening = asyncio.ensure_future(events.listen(on_event, kinds=(Event.JOB_ENDED,), ready=ready))
    await ready.wait()
    try:
        events.publish(Event.JOB_ENDED, page_id="main", job_id="first")
        events.publish(Event.PAGE_BUSY, page_id="main", job_id="first")
        events.publish(Event.JOB_STARTED, page_id="main", job_id="second")
        events.publish(Event.JOB_ENDED, page_id="main", job_id="last")
        await asyncio.wait_for(last.wait(), 10)
    finally:
        listening.cancel()
    assert [(message["event"], message["job_id"]) for message in heard] == [("job.ended", "first"), ("job.ended", "last")]


async def test_publishing_holds_its_task_until_it_is_sent():
    events.subscribed[Event.PAGE_IDLE] += 1  # as a listener of page.idle does
    try:
        before = set(tasks._running)
        events.publish(Event.PAGE_IDLE, page_id="main")
        sending = set(tasks._running) - before
        assert len(sending) == 1 and next(iter(sending)).get_name() == "the event page.idle"
        await asyncio.wait(sending)
        assert not sending & tasks._running
    finally:
        events.subscribed[Event.PAGE_IDLE] -= 1


async def test_an_event_nobody_hears_is_not_sent():
    """No listener handles page.idle and no socket is connected: no task."""
    before = set(tasks._running)
    events.publish(Event.PAGE_IDLE, page_id="main")
    assert set(tasks._running) == before
