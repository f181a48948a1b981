"""The bus in-process: a listener hears only the kinds it names, in the
order they were published, called by `publish` itself (no task, no
channel); the sockets' sending is a task held until it ends, and an event
nobody hears is not sent at all."""

from __future__ import annotations

import asyncio

from core.events import Bus, Event


async def test_a_listener_hears_only_its_kinds_in_order_before_publish_returns():
    bus = Bus()
    heard: list[dict] = []
    unsubscribe = bus.subscribe((Event.JOB_ENDED,), heard.append)
    try:
        before = set(bus.tasks.running)
        bus.publish(Event.JOB_ENDED, page_id="main", job_id="first")
        assert [message["job_id"] for message in heard] == ["first"]  # already: a call, not a message in flight
        bus.publish(Event.PAGE_BUSY, page_id="main", job_id="first")
        bus.publish(Event.JOB_STARTED, page_id="main", job_id="second")
        bus.publish(Event.JOB_ENDED, page_id="main", job_id="last")
        assert set(bus.tasks.running) == before  # no socket connected: no task at all
    finally:
        unsubscribe()
    bus.publish(Event.JOB_ENDED, page_id="main", job_id="after")
    assert [(message["event"], message["job_id"]) for message in heard] == [("job.ended", "first"), ("job.ended", "last")]


async def test_a_failing_listener_is_logged_and_the_others_still_hear(caplog):
    bus = Bus()
    heard: list[str] = []

    def broken(message: dict) -> None:
        raise RuntimeError("listener bug")

    unsubscribe = [bus.subscribe((Event.JOB_ENDED,), broken),
                   bus.subscribe((Event.JOB_ENDED,), lambda message: heard.append(message["job_id"]))]
    try:
        bus.publish(Event.JOB_ENDED, page_id="main", job_id="j1")
    finally:
        for each in unsubscribe:
            each()
    assert heard == ["j1"] and "a listener of job.ended failed" in caplog.text


async def test_sending_to_the_sockets_holds_its_task_until_it_is_sent():
    bus = Bus()
    bus.sockets += 1  # as a connected event socket does
    try:
        before = set(bus.tasks.running)
        bus.publish(Event.PAGE_IDLE, page_id="main")
        sending = set(bus.tasks.running) - before
        assert len(sending) == 1 and next(iter(sending)).get_name() == "the event page.idle"
        await asyncio.wait(sending)
        assert not sending & bus.tasks.running
    finally:
        bus.sockets -= 1


async def test_an_event_nobody_hears_is_not_sent():
    """No listener handles page.idle and no socket is connected: no task."""
    bus = Bus()
    before = set(bus.tasks.running)
    bus.publish(Event.PAGE_IDLE, page_id="main")
    assert set(bus.tasks.running) == before
