"""Schedules: rows that start a job at the instants of a cron expression,
as a client's start would (schedules/firing.py fires them)."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q


class ScheduleQuerySet(models.QuerySet):
    def active(self) -> ScheduleQuerySet:
        """Not paused: the ones the loop fires."""
        return self.filter(paused=False)

    def due(self, now: float) -> ScheduleQuerySet:
        """Fires due now: an unpaused schedule at or past its instant, or any
        schedule a command asked to fire (`manage.py schedules trigger`)."""
        return self.filter(Q(paused=False, next_fire_at__lte=now) | Q(fire_requested_at__isnull=False)).order_by("next_fire_at")

    def earliest_fire_at(self) -> float | None:
        return self.active().exclude(next_fire_at=None).order_by("next_fire_at").values_list("next_fire_at", flat=True).first()

    def with_id(self, schedule_id: str) -> Schedule | None:
        return self.filter(id=schedule_id).first()

    def named_or_id(self, name_or_id: str) -> Schedule | None:
        """The schedule of this id, else of this name (a name is never an id's 16 hex)."""
        return self.filter(Q(id=name_or_id) | Q(name=name_or_id)).first()

    def listed(self) -> ScheduleQuerySet:
        return self.order_by("name")


class Schedule(models.Model):
    """A cron schedule, what it starts, and its counters.

    The loop's changes are conditional UPDATEs that name what they expect
    (`claim_fire`: the instant it fires), so an edit through the API, the
    admin or a command in between wins, and the loop acts on what it finds.
    """

    class Overlap(models.TextChoices):
        SKIP = "skip"
        QUEUE = "queue"
        CANCEL_RUNNING = "cancel_running"

    id = models.CharField(max_length=16, primary_key=True)
    name = models.CharField(max_length=100, unique=True)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    page_id = models.CharField(max_length=32, help_text="A page's id, or `any`.")
    plugin = models.CharField(max_length=200, help_text="family/action")
    params = models.JSONField(default=dict, blank=True)
    # The job headers of each fire: X-Callback-Url or X-Result-Ttl (one of
    # them), X-Queue-Timeout (null: until the schedule's next fire, at most
    # an hour), X-Priority, X-Retry (0: none) and X-Retry-Backoff.
    callback_url = models.TextField(null=True, blank=True)
    result_ttl = models.FloatField(null=True, blank=True)
    queue_timeout = models.FloatField(null=True, blank=True)
    priority = models.SmallIntegerField(default=0)
    retry = models.SmallIntegerField(default=0)
    retry_backoff = models.FloatField(default=5.0)
    overlap = models.CharField(max_length=16, choices=Overlap.choices, default=Overlap.SKIP)
    catchup_s = models.FloatField(default=0.0)
    paused = models.BooleanField(default=False)
    # Epoch seconds. `next_fire_at` is kept while paused and set again on resume.
    next_fire_at = models.FloatField(null=True, blank=True, db_index=True)
    fire_requested_at = models.FloatField(null=True, blank=True)
    last_fired_at = models.FloatField(null=True, blank=True)
    last_job_id = models.CharField(max_length=16, null=True, blank=True)
    fired = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)
    missed = models.IntegerField(default=0)
    refused = models.IntegerField(default=0)
    last_error = models.TextField(null=True, blank=True)
    last_refused_at = models.FloatField(null=True, blank=True)
    created_at = models.FloatField()
    updated_at = models.FloatField()

    objects = ScheduleQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron})"

    # --- the loop's transitions --------------------------------------------------------------

    def claim_fire(self, *, due: float, next_fire_at: float | None) -> bool:
        """The fire at `due` is this caller's: the schedule moves on to
        `next_fire_at`. False when the row changed since it was read (edited,
        paused, deleted, fired by another)."""
        return bool(
            Schedule.objects.filter(id=self.id, paused=False, next_fire_at=due).update(next_fire_at=next_fire_at)
        )

    def claim_request(self) -> bool:
        """A command's fire request is this caller's to fire: it is cleared."""
        return bool(
            Schedule.objects.filter(id=self.id, fire_requested_at=self.fire_requested_at).update(fire_requested_at=None)
        )

    def record_fired(self, *, at: float, job_id: str) -> None:
        Schedule.objects.filter(id=self.id).update(fired=F("fired") + 1, last_fired_at=at, last_job_id=job_id)

    def record_skipped(self) -> None:
        Schedule.objects.filter(id=self.id).update(skipped=F("skipped") + 1)

    def record_refused(self, *, error: str, at: float) -> None:
        Schedule.objects.filter(id=self.id).update(refused=F("refused") + 1, last_error=error, last_refused_at=at)

    def record_late(self, *, count: int) -> None:
        """The loop fired late: the instants that passed meanwhile are missed."""
        Schedule.objects.filter(id=self.id).update(missed=F("missed") + count)

    def record_missed(self, *, count: int, next_fire_at: float | None, expected: float) -> bool:
        """Fires missed (the worker stopped, or the loop ran late): counted,
        and the schedule moves on, provided its instant is still `expected`."""
        moved = Schedule.objects.filter(id=self.id, next_fire_at=expected).update(
            missed=F("missed") + count, next_fire_at=next_fire_at
        )
        return bool(moved)
