"""Live events: `ws://HOST/api/v1/events`, a channels consumer on the event bus.

The handshake must carry the bearer key (`Authorization: Bearer …`); a bad
or missing key, a bad filter, or one socket past MAX_EVENT_SOCKETS (for a read
key, past MAX_EVENT_SOCKETS less the share kept for the full key: core/caps.py)
is refused before the socket is accepted (daphne answers the handshake 403). Optional
query filters: `job=<job id>` and `page=<page id>`; and `since=<event id>`, the
last event a client saw: the socket first sends the kept events after it
(core/event_log.py), then the live ones, none twice and none left out at the
seam (each event's id says where it stands).

Each event is one JSON text message (core/events.py builds it once for all
sockets). A client that reads slowly never slows the worker: each socket has
its own queue of at most EVENT_SOCKET_QUEUE events, filled by the bus and
drained only as fast as the connection takes them; when it is full the
oldest events are dropped, and the client is told how many with
`{"event": "overflow", "dropped": n}` before the next one. Sockets are not
client activity: an open one does not keep a sleepy worker awake.

The seam: the socket joins the bus's group before its replay asks the log to
write what it holds, so every event is either in the store when the replay
reads it, or in the socket's queue, or both; the sender sends the replay
first, then the queue, skipping any id it has sent already. When events after
`since` are no longer kept (past the window), the first message says so:
`{"event": "missed", …, "detail": {"cause": "window", "since": …}}`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from core import events
from core.auth import READ, authorization_matches, key_role
from core.caps import has_room
from core.db_thread import on_db_thread
from core.event_log import carries_job, missed_text, with_id, without_job
from core.runtime import runtime_of
from core.writable import Writable
from core.wrong_keys import KeyFlood, scope_address
from jobs.selectors import held_job_ids
from jobs.shapes import for_reader as job_for_reader

JOB_FILTER = re.compile(r"[0-9a-f]{16}")
PAGE_FILTER = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
EVENT_ID = re.compile(r"[0-9]{1,15}", re.ASCII)  # an event's id, as `since`


class EventStream(AsyncWebsocketConsumer):
    counted = False

    async def connect(self) -> None:
        headers = dict(self.scope.get("headers", []))
        offered = headers.get(b"authorization")
        authorization = (offered or b"").decode("latin-1")
        filters = self.filters()
        if offered is not None:
            # A wrong key waits its turn before the close (core/wrong_keys.py);
            # a flood of them is closed with the key not compared.
            address = scope_address(self.scope)
            try:
                right = await runtime_of(self).wrong_keys.check(address, lambda: authorization_matches(authorization))
            except KeyFlood:
                right = False
            if not right:
                await self.close()
                return
        if offered is None or filters is None:
            await self.close()
            return
        # Counted here and taken below with no await between; a read key
        # leaves the full key its share (core/caps.py).
        self.bus: events.Bus = runtime_of(self).bus
        if not has_room(key_role(authorization), self.bus.sockets, settings.MAX_EVENT_SOCKETS):
            await self.close()
            return
        self.job_filter, self.page_filter, self.since = filters
        # A read key's socket shows each event's job as its polls do (jobs.shapes.for_reader).
        self.reads_only = key_role(authorization) == READ
        self.bus.sockets += 1
        self.counted = True
        # The newest id sent: live events up to it are skipped. Without `since`
        # (or with one never issued), the events published before this socket
        # counted are not its own.
        issued = self.bus.log.next_id - 1 if self.bus.log.next_id is not None else 0
        self.last_sent = issued if self.since is None else min(self.since, issued)
        self.queue: deque[tuple[int | None, str]] = deque()
        self.dropped = 0
        self.dropped_id: int | None = None  # the newest dropped, which a replay may have sent
        self.queued = asyncio.Event()
        await self.channel_layer.group_add(events.GROUP, self.channel_name)
        await self.accept()
        self.writable = Writable.of(self.base_send)
        self.sender = self.bus.tasks.spawn(self.send_queued(), about="an event socket")

    def filters(self) -> tuple[str | None, str | None, int | None] | None:
        """The `job` and `page` filters and `since`, or None when one is malformed."""
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        job = query.get("job", [None])[-1]
        page = query.get("page", [None])[-1]
        since = query.get("since", [None])[-1]
        if (job is not None and not JOB_FILTER.fullmatch(job)) or (page is not None and not PAGE_FILTER.fullmatch(page)):
            return None
        if since is not None and not EVENT_ID.fullmatch(since):
            return None
        return job, page, None if since is None else int(since)

    async def bus_event(self, message: dict[str, Any]) -> None:
        """An event from the bus (channels dispatches `type: bus.event` here)."""
        text = message.get("text")
        if text is None:  # published before this socket was counted
            return
        if self.job_filter is not None and message["job_id"] != self.job_filter:
            return
        if self.page_filter is not None and message["page_id"] != self.page_filter:
            return
        if len(self.queue) >= settings.EVENT_SOCKET_QUEUE:
            dropped_id, _ = self.queue.popleft()
            self.dropped += 1
            self.dropped_id = dropped_id
        self.queue.append((message.get("id"), text))
        self.queued.set()

    def shown(self, text: str) -> str:
        """An event's JSON as this socket sends it: a read key's redacted."""
        return for_reader(text) if self.reads_only and carries_job(text) else text

    async def send_event(self, event_id: int | None, text: str) -> None:
        if self.writable is not None:
            await self.writable.open.wait()
        if event_id is None:
            await self.send(text_data=self.shown(text))
            return
        self.last_sent = event_id
        await self.send(text_data=with_id(event_id, self.shown(text)))

    async def send_queued(self) -> None:
        if self.since is not None:
            await self.replay()
        while True:
            await self.queued.wait()
            self.queued.clear()
            while self.queue:
                event_id, text = self.queue.popleft()
                if event_id is not None and event_id <= self.last_sent:
                    continue  # sent by the replay
                if self.dropped:
                    dropped, self.dropped = self.dropped, 0
                    # Dropped while a replay ran, and sent by it: nothing was missed.
                    if self.dropped_id is None or self.dropped_id > self.last_sent:
                        await self.send_event(None, json.dumps({"event": "overflow", "dropped": dropped}))
                await self.send_event(event_id, text)

    async def replay(self) -> None:
        """The kept events after `since`, oldest first, before the live ones
        queued meanwhile; `missed` first when some are no longer kept."""
        log = self.bus.log
        await log.flush()  # every event published before now is in the store, or queued here
        after = self.since
        if not log.keeps or log.next_id is None or after >= log.next_id:
            # Nothing to replay from: no log (the window is empty), or an id
            # this store never issued (another worker's, or a store started afresh).
            cause = "unknown" if log.keeps and log.next_id is not None else "window"
            await self.send_event(None, missed_text(time.time(), cause=cause, since=after))
            return
        told = False
        while True:
            rows, gone = await log.read(after, self.job_filter, self.page_filter)
            if gone and not told:
                told = True
                await self.send_event(None, missed_text(time.time(), cause="window", since=after))
            deleted = await deleted_jobs(rows)
            for event_id, job_id, text in rows:
                await self.send_event(event_id, without_job(text) if job_id in deleted else text)
            if not rows:
                return
            after = rows[-1][0]

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Clients have nothing to say; what they send is ignored."""

    async def disconnect(self, code: int) -> None:
        if not self.counted:
            return
        self.counted = False
        self.bus.sockets -= 1
        self.sender.cancel()
        await self.channel_layer.group_discard(events.GROUP, self.channel_name)


async def deleted_jobs(rows: list[tuple[int, str | None, str]]) -> set[str]:
    """The jobs whose kept events carry them but which the store no longer
    holds (delivered, forgotten, past their deadline): a replay shows those
    events with `"job": null`, as the sweep leaves them, for a deleted job's
    result is shown to nobody (docs/guides/USING_JOBS.md, "Data deleted")."""
    carried = {job_id for _, job_id, text in rows if job_id is not None and carries_job(text)}
    if not carried:
        return set()
    return carried - await on_db_thread(held_job_ids)(job_ids=carried, now=time.time())


def for_reader(text: str) -> str:
    """An event as a read key's socket sends it: its job as a read key's poll
    shows it (no live link, no X-Debug files, the callback without its
    credentials, the result's secret values as `…`)."""
    event = json.loads(text)
    if isinstance(event.get("job"), dict):
        event["job"] = job_for_reader(event["job"])
    return json.dumps(event, separators=(",", ":"))
