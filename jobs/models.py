"""Async jobs: a plugin call started with 202 whose answer is kept in the store
until it is polled out or delivered by webhook."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class JobQuerySet(models.QuerySet):
    def running(self) -> JobQuerySet:
        return self.filter(state=Job.State.RUNNING)

    def ended(self) -> JobQuerySet:
        return self.exclude(state=Job.State.RUNNING)

    def held(self, now: float) -> JobQuerySet:
        """Jobs that count against MAX_JOBS: running, or holding a live result."""
        return self.filter(Q(state=Job.State.RUNNING) | Q(expires_at__gt=now))

    def expired(self, now: float) -> JobQuerySet:
        """Ended jobs past their deadline: nothing may read or deliver them."""
        return self.ended().filter(expires_at__lte=now)

    def webhooks_pending(self) -> JobQuerySet:
        return self.ended().filter(mode=Job.Mode.WEBHOOK)

    def due_for_delivery(self, now: float) -> JobQuerySet:
        """Webhook jobs whose next attempt is due and not claimed by a live deliverer."""
        return self.webhooks_pending().filter(
            next_attempt_at__lte=now, expires_at__gt=now
        ).filter(Q(attempt_claimed_until__isnull=True) | Q(attempt_claimed_until__lte=now))


class Job(models.Model):
    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        INTERRUPTED = "interrupted"

    class Mode(models.TextChoices):
        POLL = "poll"
        WEBHOOK = "webhook"

    id = models.CharField(max_length=16, primary_key=True)
    page_id = models.CharField(max_length=32)
    plugin = models.CharField(max_length=200)
    params = models.JSONField(default=dict)
    state = models.CharField(max_length=12, choices=State.choices, default=State.RUNNING, db_index=True)
    mode = models.CharField(max_length=8, choices=Mode.choices)
    ttl = models.FloatField(null=True, blank=True)
    callback = models.TextField(null=True, blank=True)
    started_at = models.FloatField()
    finished_at = models.FloatField(null=True, blank=True)
    # After this nothing is kept: ttl after the end (polling), or past the
    # last webhook attempt (webhook).
    expires_at = models.FloatField(null=True, blank=True, db_index=True)
    status = models.IntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    # Tokens of the media files the run stored, held for this job.
    media_tokens = models.JSONField(default=list)
    # Webhook delivery: POSTs made, the last schedule slot used, the next one.
    attempts = models.IntegerField(default=0)
    last_slot = models.IntegerField(default=-1)
    next_attempt_at = models.FloatField(null=True, blank=True, db_index=True)
    attempt_claimed_until = models.FloatField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.id} {self.plugin} ({self.state})"

    @property
    def ended(self) -> bool:
        return self.state != self.State.RUNNING

    def finish(self, *, state: str, status: int, result: dict, finished_at: float, media_tokens: list[str]) -> None:
        """The plugin ended (or the worker stopped under it): keep the answer
        until its deadline and, for a webhook, schedule the first attempt."""
        self.state = state
        self.status = status
        self.result = result
        self.finished_at = finished_at
        self.media_tokens = [*self.media_tokens, *media_tokens]
        if self.mode == self.Mode.WEBHOOK:
            self.expires_at = finished_at + webhook_window()
            self.next_attempt_at = finished_at + attempt_offsets()[0]
        else:
            self.expires_at = finished_at + (self.ttl or 0)
        self.save(update_fields=["state", "status", "result", "finished_at", "media_tokens", "expires_at", "next_attempt_at"])

    def slot_due(self, now: float) -> int:
        """The schedule slot an attempt at `now` stands for: the latest one due.
        Slots missed while the worker was down collapse into this one."""
        offsets = attempt_offsets()
        due = [i for i, offset in enumerate(offsets) if self.finished_at + offset <= now and i > self.last_slot]
        if due:
            return due[-1]
        # A claim without an outcome: its deliverer died mid-POST, so the same
        # slot goes out again (the receiver may see the job twice).
        return self.last_slot if self.attempt_claimed_until is not None else self.last_slot + 1

    def claim_attempt(self, now: float, claim_s: float) -> int:
        """Take the due attempt for this process; answers its slot number (1-based)."""
        self.last_slot = self.slot_due(now)
        self.attempts += 1
        self.attempt_claimed_until = now + claim_s
        self.save(update_fields=["last_slot", "attempts", "attempt_claimed_until"])
        return self.last_slot + 1

    def schedule_retry(self, error: str) -> bool:
        """After a failed attempt: the next slot, or False when none is left."""
        offsets = attempt_offsets()
        self.last_error = error
        self.attempt_claimed_until = None
        if self.last_slot + 1 >= len(offsets):
            self.next_attempt_at = None
            self.save(update_fields=["last_error", "attempt_claimed_until", "next_attempt_at"])
            return False
        self.next_attempt_at = self.finished_at + offsets[self.last_slot + 1]
        self.save(update_fields=["last_error", "attempt_claimed_until", "next_attempt_at"])
        return True


def attempt_offsets() -> list[float]:
    return sorted(settings.WEBHOOK_ATTEMPTS_S)


def webhook_window() -> float:
    """How long after its end a webhook job may still be delivered: the last
    attempt and its timeout."""
    return attempt_offsets()[-1] + settings.WEBHOOK_TIMEOUT_S


class DeliveryAttempt(models.Model):
    """One webhook POST and how it ended. Kept after its job is deleted."""

    class Outcome(models.TextChoices):
        DELIVERED = "delivered"
        RETRY = "retry"
        GAVE_UP = "gave_up"

    job_id = models.CharField(max_length=16, db_index=True)
    number = models.IntegerField(help_text="X-Penelope-Attempt: the schedule slot, 1 to 4")
    url = models.TextField()
    started_at = models.FloatField()
    duration_ms = models.FloatField()
    status_code = models.IntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    error = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
