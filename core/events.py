"""The worker's one event bus: every job transition and page change is
published here once, on channels' channel layer, and whoever needs to know
listens (the long-poll waiters, the webhook deliverer, the event sockets).

The layer is channels' in-memory one: a worker is one process with one
event loop, and everything that listens runs on that loop, so nothing has to
leave the process (docs/design/EVENTS.md says when a shared layer would be
needed). Publishing never blocks: `publish` is a plain function, callable
from any code on the loop, and the message reaches every listener in the
order it was published. Each event is also shown to the metrics
(`core.metrics.on_event`), which count jobs started and ended.

A message is a dict: `type` (channels' dispatch key, always `bus.event`),
`event` (an `Event`, e.g. `Event.JOB_ENDED`, whose value `job.ended` is what
sockets send; a listener names the kinds it handles), `at` (epoch seconds), `page_id`, `job_id`, any
fields the publisher adds (`state`, `mode`), and `text`: the event as an
event socket sends it, JSON, built only while a socket is connected.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import json
import time
from collections.abc import Callable, Collection
from typing import Any

from channels.layers import get_channel_layer

from core import metrics
from core.tasks import spawn

GROUP = "penelope.events"
MESSAGE_TYPE = "bus.event"


class Event(enum.StrEnum):
    """Every kind of event the bus carries; its value is the name clients see."""

    JOB_QUEUED = "job.queued"
    JOB_STARTED = "job.started"
    JOB_PROGRESS = "job.progress"
    JOB_RETRYING = "job.retrying"
    JOB_NEEDS_HUMAN = "job.needs_human"  # its plugin asks a person (live/human.py)
    JOB_ENDED = "job.ended"
    JOB_DELIVERED = "job.delivered"
    JOB_GAVE_UP = "job.gave_up"
    PAGE_BUSY = "page.busy"
    PAGE_IDLE = "page.idle"
    PAGE_LEASED = "page.leased"
    PAGE_RELEASED = "page.released"
    PAGE_CRASHED = "page.crashed"
    BROWSER_DOWN = "browser.down"
    BROWSER_UP = "browser.up"
    BROWSER_FAILED = "browser.failed"
    # A schedule started its job (`job_id`), or skipped a fire because its
    # previous job still ran (overlap `skip`); `detail` names the schedule.
    SCHEDULE_FIRED = "schedule.fired"
    SCHEDULE_SKIPPED = "schedule.skipped"


class Watchers:
    """How many event sockets are connected: the JSON text of an event is
    built only while one is."""

    def __init__(self) -> None:
        self.sockets = 0


watchers = Watchers()

# The kinds the running listeners (`listen`) handle, each counted once per
# listener: an event of a kind that no listener handles, while no socket is
# connected, is not sent at all.
subscribed: collections.Counter[Event] = collections.Counter()


def publish(
    event: Event,
    *,
    page_id: str | None,
    job_id: str | None = None,
    job: Callable[[], dict[str, Any]] | None = None,
    detail: dict[str, Any] | None = None,
    **fields: Any,
) -> None:
    """Publish one event to every listener. `job` renders the job as a poll
    shows it; it is called only when a socket will send it. `detail` (the
    browser's and a crash's events) is sent to sockets as it is. Outside a
    running event loop (a management command) there is nobody to tell, and
    an event that no socket and no listener hears is only counted: sending
    the two a job start publishes cost its 202 about 0.4 ms
    (docs/BENCHMARKS.md)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    metrics.on_event(event, fields)
    if not (watchers.sockets or subscribed[event]):
        return
    at = time.time()
    message = {"type": MESSAGE_TYPE, "event": event, "at": at, "page_id": page_id, "job_id": job_id, **fields}
    if detail is not None:
        message["detail"] = detail
    if watchers.sockets:
        sent = {"event": event, "at": round(at, 6), "page_id": page_id, "job_id": job_id, "job": job() if job else None}
        if detail is not None:
            sent["detail"] = detail
        # Serialized once here: the layer copies a message for each listener,
        # and a string costs nothing to copy.
        message["text"] = json.dumps(sent, separators=(",", ":"))
    # One task per event; tasks start in the order they are created, so the
    # listeners receive events in the order they were published.
    spawn(get_channel_layer().group_send(GROUP, message), about=f"the event {event.value}")


class Listener:
    """One channel in the bus's group, from `async with` to its end:
    `await listener.receive()` answers the next event."""

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.channel: str | None = None

    async def __aenter__(self) -> Listener:
        self.channel = await self.layer.new_channel("penelope.listener.")
        await self.layer.group_add(GROUP, self.channel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.layer.group_discard(GROUP, self.channel)

    async def receive(self) -> dict[str, Any]:
        return await self.layer.receive(self.channel)


async def listen(
    on_event: Callable[[dict[str, Any]], object], *, kinds: Collection[Event], ready: asyncio.Event | None = None
) -> None:
    """Call `on_event` with every event of the `kinds` it handles, for as
    long as this task runs (a runtime service). `ready` is set once events
    reach it."""
    wanted = frozenset(kinds)
    subscribed.update(wanted)
    try:
        async with Listener() as listener:
            if ready is not None:
                ready.set()
            while True:
                message = await listener.receive()
                if message["event"] in wanted:
                    on_event(message)
    finally:
        subscribed.subtract(wanted)
