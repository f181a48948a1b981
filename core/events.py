"""The worker's one event bus: every job transition and page change is
published here once, and whoever needs to know hears it.

Listeners inside the worker (the webhook deliverer, the request log's
browser rows) are called directly by `publish`, in order, with no task and
no trip through a channel layer. The event sockets (jobs/sockets.py) are
channels consumers: the event reaches them over channels' in-memory layer,
and only while one is connected (docs/design/EVENTS.md says when a shared
layer would be needed). Publishing never blocks: `publish` is a plain
function, callable from any code on the loop. Each event is also shown to
the metrics (`core.metrics.on_event`), which count jobs started and ended.
The long-poll waiters are woken by the job runner itself (jobs/waiting.py).

While the event log keeps events (EVENT_LOG_KEEP, core/event_log.py), each
event is numbered and its JSON queued for the store, whether or not a socket
is connected, so a socket that reconnects can ask for what it missed.

A message is a dict: `type` (channels' dispatch key, always `bus.event`),
`event` (an `Event`, e.g. `Event.JOB_ENDED`, whose value `job.ended` is what
sockets send; a listener names the kinds it handles), `at` (epoch seconds), `page_id`, `job_id`, any
fields the publisher adds (`state`, `mode`), and, sent to the sockets, `id`
(the event's in the log, or None) and `text`: the event as an event socket
sends it, JSON without its id, built only while a socket is connected or the
log keeps events.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import json
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from channels.layers import get_channel_layer

from core import metrics
from core.event_log import EventLog
from core.runtime import Tasks

log = logging.getLogger("penelope.events")

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
    # Only from the log, never published: events after `detail.after_id` may
    # be lost (a crash), or a replay could not give all it was asked for.
    MISSED = "missed"


Message = dict[str, Any]  # `type`, `event`, `at`, `page_id`, `job_id`, the publisher's fields, `id`, `text`
OnEvent = Callable[[Message], object]


class Bus:
    """The worker's one event bus. `publish` calls each in-process listener
    of the event's kind (the webhook deliverer, the request log) directly,
    in the order listeners subscribed, before it returns; the channels layer
    carries the event only to the WebSocket consumers (jobs/sockets.py), and
    only while one is connected. A listener's error is logged, never raised
    into the publisher."""

    def __init__(self, tasks: Tasks | None = None) -> None:
        self.tasks = tasks or Tasks()  # the sockets' sends
        self.sockets = 0  # event sockets connected: the JSON text is built only while one is, or the log keeps it
        self._listeners: dict[Event, list[OnEvent]] = collections.defaultdict(list)
        self.log = EventLog()  # numbers every event and keeps it for replays

    def subscribe(self, kinds: Collection[Event], on_event: OnEvent) -> Callable[[], None]:
        """Call `on_event` with every event of `kinds`; answers the unsubscribe."""
        for kind in kinds:
            self._listeners[kind].append(on_event)

        def unsubscribe() -> None:
            for kind in kinds:
                if on_event in self._listeners[kind]:
                    self._listeners[kind].remove(on_event)

        return unsubscribe

    def hears(self, event: Event) -> bool:
        return bool(self.sockets or self._listeners.get(event))

    def publish(
        self,
        event: Event,
        *,
        page_id: str | None,
        job_id: str | None = None,
        job: Callable[[], dict[str, Any]] | None = None,
        detail: dict[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        """Publish one event to every listener and socket, and to the log. `job`
        renders the job as a poll shows it; it is called only when a socket
        will send it or the log keeps it. `detail` (the browser's and a
        crash's events) is sent to sockets as it is. Outside a running event
        loop (a management command) there is nobody to tell, and an event
        that no socket, no listener and no log hears is only counted."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        metrics.on_event(event, fields)
        logged = self.log.keeps
        if not logged and not self.hears(event):
            return
        at = time.time()
        message = {"type": MESSAGE_TYPE, "event": event, "at": at, "page_id": page_id, "job_id": job_id, **fields}
        if detail is not None:
            message["detail"] = detail
        for on_event in list(self._listeners.get(event, ())):
            try:
                on_event(message)
            except Exception:
                log.exception("a listener of %s failed", event.value)
        if not logged and not self.sockets:
            return
        sent = {"event": event, "at": round(at, 6), "page_id": page_id, "job_id": job_id, "job": job() if job else None}
        if detail is not None:
            sent["detail"] = detail
        # Serialized once here, for the log and for every socket: the layer
        # copies a message for each socket, and a string costs nothing to
        # copy. One task per event; tasks start in the order they are
        # created, so sockets get events in order, the order of their ids.
        text = json.dumps(sent, separators=(",", ":"))
        event_id = self.log.add(at, event, page_id, job_id, text) if logged else None
        if not self.sockets:
            return
        message = {**message, "id": event_id, "text": text}
        self.tasks.spawn(get_channel_layer().group_send(GROUP, message), about=f"the event {event.value}")
