"""The event log: every event the bus publishes, kept for a while so an
event socket that reconnects can ask for what it missed (`?since=<id>`).
Written by core/event_log.py a batch at a time; docs/design/EVENTS.md says
what it promises across restarts."""

from __future__ import annotations

from django.db import models


class EventRecord(models.Model):
    """One published event, as event sockets send it. `text` is the JSON the
    bus built for the sockets, without its `id`: a socket writes the id in
    front when it sends it, live or replayed."""

    id = models.BigIntegerField(primary_key=True)  # assigned by the bus, in publish order; never reused
    at = models.FloatField(db_index=True)  # epoch seconds: the age bound sweeps by it
    kind = models.CharField(max_length=32)
    page_id = models.CharField(max_length=64, null=True)
    job_id = models.CharField(max_length=16, null=True)
    text = models.TextField()

    class Meta:
        db_table = "core_event"


class EventSequence(models.Model):
    """One row: the ids the bus may issue before it writes this row again
    (`reserved`), and the newest id the sweep removed (`swept_to`). A start
    that finds `reserved` past the newest kept event knows the last run
    stopped without writing all it published (a crash)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    reserved = models.BigIntegerField(default=0)
    swept_to = models.BigIntegerField(default=0)

    class Meta:
        db_table = "core_event_sequence"
