"""The event log: every event the bus publishes gets an id and is kept in the
store for a window (EVENT_LOG_KEEP events, EVENT_LOG_KEEP_S seconds), so an
event socket that reconnects with `?since=<id>` gets what it missed, in
order, before the live events (jobs/sockets.py).

Writing costs the job path one list append: `publish` numbers the event and
queues its row, and the worker's "event log" loop writes the queued rows
every FLUSH_S in one transaction (one INSERT run), as the request log does. A replay flushes first, so it reads every event published before
it from the store.

Ids never repeat, across restarts and crashes. The store keeps `reserved`,
the highest id this run may issue before it writes that row again (each
flush moves it on while fewer than half of RESERVE_IDS are left). A start
goes on from the highest id it knows of; after a crash (kill -9, a power
loss) the newest events, published within a flush interval of the crash,
may not have been written: a start that finds `reserved` past the newest
kept event writes a `missed` event (cause `crash`) there and goes on after
it, so a socket replaying across it is told that events may be lost
between `after_id` and it. docs/design/EVENTS.md says what the socket
promises.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Max, Min, Q, QuerySet
from django.db.models.functions import Greatest

from core.db_thread import insert_statement, on_db_thread
from core.models import EventRecord, EventSequence

log = logging.getLogger("penelope.events")

# How often the queued events are written: what a crash (kill -9) may lose.
FLUSH_S = 0.1
# Ids reserved in the store ahead of the ones issued: a flush moves the
# reservation on when fewer than half are left. Only a run that publishes
# half of it within one flush interval could issue an id the store has not
# reserved (and then only a crash right then could see it issued twice).
RESERVE_IDS = 100_000
# Rows one read of a replay takes from the store: a short call on the database
# thread, and at most REPLAY_ROWS × TEXT_MAX bytes in memory.
REPLAY_ROWS = 100
# The longest event JSON kept (a job's result may be megabytes): a longer one
# is kept as a `missed` event (cause `large`) with its id, page and job, which
# tells a client that catches up to read that job by polling. With
# EVENT_LOG_KEEP this bounds what the log can hold.
TEXT_MAX = 64 * 1024
# Rows one transaction of the sweep deletes (a range of ids: one DELETE).
SWEEP_ROWS = 2000
# Rows queued while the store refuses them (a full disk) before the oldest are
# dropped; a replay that would need them answers `missed`.
PENDING_MAX = 50_000
MISSED = "missed"
COLUMNS = ("id", "at", "kind", "page_id", "job_id", "text")


@dataclass(slots=True)
class Row:
    """One published event waiting to be written; `id` is None only for an
    event published before the log opened (the browser's launch), numbered
    when it opens."""

    id: int | None
    at: float
    kind: str
    page_id: str | None
    job_id: str | None
    text: str


def carries_job(text: str) -> bool:
    """Whether an event's JSON holds its job as a poll shows it."""
    return '"job":{' in text


def without_job(text: str) -> str:
    """An event's JSON with its job left out (`"job":null`), as the bus writes
    JSON: what the log gives back of a job's event once the job is deleted."""
    event = json.loads(text)
    event["job"] = None
    return json.dumps(event, separators=(",", ":"))


def with_id(event_id: int, text: str) -> str:
    """An event's JSON (`{"event": …}`) with its id written first."""
    return f'{{"id":{event_id},{text[1:]}'


def missed_text(at: float, page_id: str | None = None, job_id: str | None = None, **detail: object) -> str:
    """A `missed` event, shaped as the others are: what a socket is told when
    it cannot be given every event after its `since` (the page and the job
    are those of an event kept only as too large)."""
    sent = {"event": MISSED, "at": round(at, 6), "page_id": page_id, "job_id": job_id, "job": None, "detail": detail}
    return json.dumps(sent, separators=(",", ":"))


class EventLog:
    """The bus's log (core/events.py owns one): numbers each event and
    queues it for the store; `open` at start, `flush` from the worker's loop
    and before each replay, `close` at a clean stop."""

    def __init__(self) -> None:
        self.next_id: int | None = None  # None until `open`
        self.reserved = 0
        self.pending: list[Row] = []
        self.dropped_to = 0  # the newest id dropped unwritten (PENDING_MAX)
        self.closed = False
        self._flushing = asyncio.Lock()

    @property
    def keeps(self) -> bool:
        return settings.EVENT_LOG_KEEP > 0 and not self.closed

    def add(self, at: float, kind: str, page_id: str | None, job_id: str | None, text: str) -> int | None:
        """Queue one event for the store: its id (None before `open`)."""
        event_id = self.next_id
        if event_id is not None:
            self.next_id = event_id + 1
        if len(text) > TEXT_MAX:
            text = missed_text(at, page_id, job_id, cause="large", event=kind)
        self.pending.append(Row(event_id, at, kind, page_id, job_id, text))
        if len(self.pending) > PENDING_MAX:
            dropped = self.pending.pop(0)
            self.dropped_to = max(self.dropped_to, dropped.id or 0)
        return event_id

    async def open(self) -> None:
        """At start, after the migrations and before the port opens: go on
        after the highest id the store knows of (its reservation included),
        and number what was published meanwhile."""
        if settings.EVENT_LOG_KEEP <= 0:
            return
        self.next_id, self.reserved = await on_db_thread(open_log)(time.time())
        for row in self.pending:
            row.id, self.next_id = self.next_id, self.next_id + 1

    async def flush(self) -> None:
        """Write every event queued so far (one transaction), and move the
        reservation on when it runs low. Serialized: once it returns, every
        event published before it was called is in the store."""
        async with self._flushing:
            if self.next_id is None or not self.pending:
                return
            batch, self.pending = self.pending, []
            reserved = self.reserved
            if self.next_id + RESERVE_IDS // 2 > reserved:
                reserved = self.next_id + RESERVE_IDS
            try:
                # Shielded: a stop that cancels the loop mid-write lets the write
                # end (the database thread runs it anyway), and the batch is not
                # queued again to be written twice.
                await asyncio.shield(on_db_thread(write_events)(batch, reserved))
            except asyncio.CancelledError:
                raise
            except Exception:
                self.pending[:0] = batch  # kept for the next flush, in order
                raise
            self.reserved = reserved

    async def close(self) -> None:
        """At a clean stop: write the rest, and give back the ids reserved
        and not issued (the next start goes on from the last one issued)."""
        if self.next_id is None or self.closed:
            return
        self.closed = True  # events published from now on are not numbered
        await self.flush()
        await on_db_thread(release_reserved)(self.next_id - 1)

    async def read(
        self, after: int, job_id: str | None, page_id: str | None
    ) -> tuple[list[tuple[int, str | None, str]], bool]:
        """The next kept events after id `after` (at most REPLAY_ROWS, oldest
        first, `missed` ones whatever the filters), as (id, job id, text); and
        whether events after `after` are gone (swept, or dropped unwritten)."""
        rows, swept_to = await on_db_thread(read_after)(after, REPLAY_ROWS, job_id, page_id)
        return rows, max(swept_to, self.dropped_to) > after


def open_log(now: float) -> tuple[int, int]:
    """The first id of this run and the ids reserved for it. After a crash,
    a `missed` event (cause `crash`) takes the id after the reservation."""
    with transaction.atomic():
        sequence, _ = EventSequence.objects.get_or_create(id=1)
        newest = max(EventRecord.objects.aggregate(newest=Max("id"))["newest"] or 0, sequence.swept_to)
        next_id = max(newest, sequence.reserved) + 1
        if sequence.reserved > newest:  # the last run stopped before writing all it reserved for
            EventRecord.objects.create(
                id=next_id,
                at=now,
                kind=MISSED,
                text=missed_text(now, cause="crash", after_id=newest),
            )
            next_id += 1
        sequence.reserved = next_id - 1 + RESERVE_IDS
        sequence.save(update_fields=["reserved"])
    return next_id, sequence.reserved


def write_events(rows: list[Row], reserved: int) -> None:
    """One INSERT run for the rows and the reservation, in one transaction."""
    sql = insert_statement(EventRecord, [EventRecord._meta.get_field(name) for name in COLUMNS], connection)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql, [(row.id, row.at, row.kind, row.page_id, row.job_id, row.text) for row in rows])
        EventSequence.objects.filter(id=1).update(reserved=Greatest(F("reserved"), reserved))


def release_reserved(last_id: int) -> None:
    EventSequence.objects.filter(id=1).update(reserved=last_id)


def read_after(
    after: int, limit: int, job_id: str | None, page_id: str | None
) -> tuple[list[tuple[int, str | None, str]], int]:
    rows = EventRecord.objects.filter(id__gt=after)
    if job_id is not None:
        rows = rows.filter(Q(job_id=job_id) | Q(kind=MISSED))
    if page_id is not None:
        rows = rows.filter(Q(page_id=page_id) | Q(kind=MISSED))
    found = list(rows.order_by("id").values_list("id", "job_id", "text")[:limit])
    sequence = EventSequence.objects.filter(id=1).values_list("swept_to", flat=True).first()
    return found, sequence or 0


def sweep_events_batch(now: float | None = None) -> int:
    """Delete the oldest kept events past EVENT_LOG_KEEP (by count) or
    EVENT_LOG_KEEP_S (by age), at most SWEEP_ROWS; answers how many."""
    now = now or time.time()
    with transaction.atomic():
        bounds = EventRecord.objects.aggregate(oldest=Min("id"), newest=Max("id"))
        if bounds["newest"] is None:
            return 0
        by_age = EventRecord.objects.filter(at__lt=now - settings.EVENT_LOG_KEEP_S).aggregate(last=Max("id"))["last"]
        cutoff = max(bounds["newest"] - max(settings.EVENT_LOG_KEEP, 0), by_age or 0)
        upto = min(cutoff, bounds["oldest"] + SWEEP_ROWS - 1)
        if upto < bounds["oldest"]:
            return 0
        deleted, _ = EventRecord.objects.filter(id__lte=upto).delete()
        EventSequence.objects.filter(id=1).update(swept_to=Greatest(F("swept_to"), upto))
    return deleted


def forget_jobs_batch(held: QuerySet) -> int:
    """Leave the job out of kept events whose job is no longer among `held`
    (the ids of the jobs the store still holds): delivered, forgotten or
    past its deadline, a job is deleted, and the log keeps no copy of it
    (its result, its callback) either. At most SWEEP_ROWS; answers how many."""
    with transaction.atomic():
        rows = list(
            EventRecord.objects.filter(job_id__isnull=False, text__contains='"job":{')
            .exclude(job_id__in=held)
            .values_list("id", "text")[:SWEEP_ROWS]
        )
        for event_id, text in rows:
            EventRecord.objects.filter(id=event_id).update(text=without_job(text))
    return len(rows)
