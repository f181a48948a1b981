"""Async jobs: a plugin call started with 202 whose answer is kept in the store
until it is polled out or delivered by webhook."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.seams import insert_row


class JobQuerySet(models.QuerySet):
    def running(self) -> JobQuerySet:
        return self.filter(state=Job.State.RUNNING)

    def queued_ahead_of(self, job: Job) -> int:
        """How many queued jobs of the same page take it before `job` (a
        higher priority, or the same one accepted earlier). Plain calls
        waiting in the page's line are not in the store: the runner's
        position counts them too."""
        ahead = Q(priority__gt=job.priority) | Q(priority=job.priority, enqueued_at__lt=job.enqueued_at)
        return self.filter(state=Job.State.QUEUED, page_id=job.page_id).filter(ahead).count()

    def retryable(self) -> JobQuerySet:
        """With attempts left (X-Retry) and no lease to lose: a restart queues them again."""
        return self.filter(retries__gte=models.F("attempt"), under_lease=False)

    def live(self) -> JobQuerySet:
        """Not ended: queued or running."""
        return self.filter(state__in=Job.LIVE_STATES)

    def queued(self) -> JobQuerySet:
        """Waiting for their page, in the order they take it: highest priority
        first, then arrival."""
        return self.filter(state=Job.State.QUEUED).order_by("-priority", "enqueued_at", "id")

    def ended(self) -> JobQuerySet:
        return self.exclude(state__in=Job.LIVE_STATES)

    def held(self, now: float) -> JobQuerySet:
        """Jobs that count against MAX_JOBS: queued, running, or holding a live result."""
        return self.filter(Q(state__in=Job.LIVE_STATES) | Q(expires_at__gt=now))

    def expired(self, now: float) -> JobQuerySet:
        """Ended jobs past their deadline: nothing may read or deliver them."""
        return self.ended().filter(expires_at__lte=now)

    def webhooks_pending(self) -> JobQuerySet:
        return self.ended().filter(mode=Job.Mode.WEBHOOK)

    def due_for_delivery(self, now: float) -> JobQuerySet:
        """Webhook jobs whose next attempt is due, claimed or not."""
        return self.webhooks_pending().filter(next_attempt_at__lte=now, expires_at__gt=now)

    def unclaimed(self) -> JobQuerySet:
        return self.filter(claim_owner__isnull=True)

    def claim_owners_besides(self, owner: str) -> set[str]:
        """The deliverers other than `owner` that hold a claim among these jobs."""
        return set(self.exclude(claim_owner__isnull=True).exclude(claim_owner=owner).values_list("claim_owner", flat=True))

    def takeable(self, dead_owners: list[str]) -> JobQuerySet:
        """Unclaimed, or claimed by a deliverer that has ended."""
        return self.filter(Q(claim_owner__isnull=True) | Q(claim_owner__in=dead_owners))

    def next_attempt_at(self) -> float | None:
        """When the first unclaimed webhook attempt among these comes due."""
        pending = self.webhooks_pending().unclaimed().filter(next_attempt_at__isnull=False)
        return pending.order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first()

    def with_id(self, job_id: str) -> Job | None:
        return self.filter(id=job_id).first()

    def with_ids(self, ids: list[str]) -> JobQuerySet:
        return self.filter(id__in=ids)

    def with_key(self, key: str) -> JobQuerySet:
        return self.filter(idempotency_key=key)

    def in_state(self, state: str | None) -> JobQuerySet:
        return self if state is None else self.filter(state=state)

    def listed(
        self, *, state: str | None = None, page_id: str | None = None, plugin: str | None = None,
        schedule_id: str | None = None, after: tuple[float, str] | None = None,
    ) -> JobQuerySet:
        """Newest accepted first, after the cursor `after` (`(accepted_at, id)`
        of the last job of the previous page; a job's place never moves),
        without the results: one indexed query."""
        jobs = self.in_state(state).defer("result", "params")
        if page_id is not None:
            jobs = jobs.filter(page_id=page_id)
        if plugin is not None:
            jobs = jobs.filter(plugin=plugin)
        if schedule_id is not None:
            jobs = jobs.filter(schedule_id=schedule_id)
        if after is not None:
            accepted_at, job_id = after
            jobs = jobs.filter(Q(accepted_at__lt=accepted_at) | Q(accepted_at=accepted_at, id__lt=job_id))
        return jobs.order_by("-accepted_at", "-id")

    def ids(self, limit: int) -> list[str]:
        return list(self.values_list("id", flat=True)[:limit])

    def count_by_state(self) -> dict[str, int]:
        counted = {state: 0 for state in Job.State.values}
        for row in self.order_by().values("state").annotate(count=models.Count("id")):
            counted[row["state"]] = row["count"]
        return counted


class Job(models.Model):
    """A job and every change of its state.

    Each change is one conditional UPDATE (or DELETE) that names the state it
    expects (`state=running`, or `claim_owner=<this deliverer>`) and answers
    whether it happened: a caller that finds the row moved by someone else
    acts on that and never overwrites what it did not see.
    """

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        INTERRUPTED = "interrupted"
        CANCELLED = "cancelled"
        TIMED_OUT = "timed_out"

    # Not ended: waiting for the page, or on it.
    LIVE_STATES = (State.QUEUED, State.RUNNING)

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
    # When it was accepted (its row stored, the 202 answered), and when it first
    # took a page: the same instant for a job that ran at once; null while a
    # queued job waits for its first turn; a retried job keeps its first.
    accepted_at = models.FloatField()
    started_at = models.FloatField(null=True, blank=True)
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
    # The deliverer that holds the attempt in progress (`Owner`, jobs/delivery.py), and
    # since when; null between attempts. A claim lasts while its owner lives.
    claim_owner = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    claimed_at = models.FloatField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    # The plugin's last progress report, stored with the end (while the job
    # runs it is kept in the worker's memory).
    progress = models.JSONField(null=True, blank=True)
    # A queued job (X-Queue-Timeout): its priority (X-Priority), when it was
    # accepted, when its wait for the page runs out, and whether it waits
    # under a lease (a restart drops leases: it then ends 423).
    # Database defaults too: a row written by an older worker, or by hand, is a plain job.
    priority = models.SmallIntegerField(default=0, db_default=0)
    enqueued_at = models.FloatField(null=True, blank=True)
    queue_deadline = models.FloatField(null=True, blank=True)
    under_lease = models.BooleanField(default=False, db_default=False)
    # Retries (X-Retry): the attempts a transient failure may take after the first
    # and the first back-off; the attempt running (or next to run), from 1, and
    # when the one running (or run last) took its page; the attempts that ended
    # ({status, started_at, finished_at}); while one waits out its back-off, when it goes back in line.
    retries = models.SmallIntegerField(default=0, db_default=0)
    retry_backoff = models.FloatField(null=True, blank=True)
    attempt = models.SmallIntegerField(default=1, db_default=1)
    attempt_started_at = models.FloatField(null=True, blank=True)
    past_attempts = models.JSONField(null=True, blank=True)
    retry_at = models.FloatField(null=True, blank=True)
    # How it was asked for, so that a retry and a re-run ask the same:
    # X-Queue-Timeout as sent, and whether it was sent to `any`; and where it
    # came from: the job it re-runs, the schedule that fired it.
    queue_timeout = models.FloatField(null=True, blank=True)
    on_any = models.BooleanField(default=False, db_default=False)
    rerun_of = models.CharField(max_length=16, null=True, blank=True)
    schedule_id = models.CharField(max_length=16, null=True, blank=True, db_index=True)
    # X-Notify-Url: where a notification goes when its plugin asks a person (live/human.py).
    notify_url = models.TextField(null=True, blank=True)
    # X-Debug as sent (plugins/debug.py), and the version of the plugin's family that ran it.
    debug = models.CharField(max_length=12, null=True, blank=True)
    family_version = models.CharField(max_length=64, null=True, blank=True)
    # An idempotent start's key, and a digest of the request it came with.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True, unique=True)
    request_digest = models.CharField(max_length=64, null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-accepted_at", "-id"]
        # The job list reads newest first, a page at a time after a cursor.
        indexes = [models.Index(fields=["accepted_at", "id"], name="jobs_newest")]

    def __str__(self) -> str:
        return f"{self.id} {self.plugin} ({self.state})"

    @property
    def ended(self) -> bool:
        return self.state not in self.LIVE_STATES

    @property
    def retries_left(self) -> bool:
        """Whether a transient failure of the attempt running now takes another (X-Retry)."""
        return self.attempt <= self.retries

    # --- transitions ---------------------------------------------------------------

    @classmethod
    def start(cls, *, state: str = State.RUNNING, **fields) -> Job:
        """A new job, running: an INSERT, which fails rather than overwrite a
        job of the same id.

        The INSERT is the one `save()` ends in, without what `save()` does
        around it (core/seams/, `insert_row`): about 60 of the 370 µs the
        ORM took on a job start's path (docs/BENCHMARKS.md)."""
        job = cls(state=state, **fields)
        insert_row(job)
        return job

    def _moved(self, expected: Q, **changes) -> bool:
        """One conditional UPDATE of this row; on success the instance shows it."""
        if not Job.objects.filter(expected, id=self.id).update(**changes):
            return False
        for name, value in changes.items():
            setattr(self, name, value)
        return True

    def finish(
        self,
        *,
        state: str = State.DONE,
        status: int,
        result: dict,
        finished_at: float,
        media_tokens: list[str],
        progress: dict | None = None,
    ) -> bool:
        """running -> done (or interrupted, or cancelled), or queued -> ended
        without running (timed out, cancelled, refused): keep the answer until
        its deadline and, for a webhook, schedule the first attempt. The row
        must still be in the state this instance holds."""
        if self.state not in self.LIVE_STATES:
            return False
        changes: dict = {
            "state": state,
            "status": status,
            "result": result,
            "finished_at": finished_at,
            "media_tokens": [*self.media_tokens, *media_tokens],
            "progress": progress if progress is not None else self.progress,
        }
        if self.mode == self.Mode.WEBHOOK:
            changes["expires_at"] = finished_at + webhook_window()
            changes["next_attempt_at"] = finished_at + attempt_offsets()[0]
        else:
            changes["expires_at"] = finished_at + (self.ttl or 0)
        return self._moved(Q(state=self.state), **changes)

    def requeue(self, *, status: int, finished_at: float, retry_at: float, queue_deadline: float, page_id: str) -> bool:
        """running -> queued: the attempt ended with a transient failure and
        attempts remain. Its end joins the past attempts; the next one waits
        out its back-off until `retry_at`, then its turn until `queue_deadline`."""
        ended = {"status": status, "started_at": round(self.attempt_started_at, 3), "finished_at": round(finished_at, 3)}
        return self._moved(
            Q(state=self.State.RUNNING),
            state=self.State.QUEUED, attempt=self.attempt + 1, past_attempts=[*(self.past_attempts or []), ended],
            retry_at=retry_at, enqueued_at=retry_at, queue_deadline=queue_deadline, page_id=page_id, progress=None,
        )

    def begin(self, *, now: float, page_id: str, family_version: str | None = None) -> bool:
        """queued -> running: the job took its page (the one `any` found); the
        attempt starts now (the job's start is its first's), run by this version of its family."""
        return self._moved(
            Q(state=self.State.QUEUED), state=self.State.RUNNING, page_id=page_id, retry_at=None, attempt_started_at=now,
            started_at=now if self.started_at is None else self.started_at, family_version=family_version,
        )

    def interrupt(self, *, now: float, status: int, result: dict) -> bool:
        """running -> interrupted, ended now: the worker stopped under it."""
        return self.finish(state=self.State.INTERRUPTED, status=status, result=result, finished_at=now, media_tokens=[])

    def slot_due(self, now: float) -> int:
        """The schedule slot an attempt at `now` stands for: the latest one due.
        Slots missed while the worker was down collapse into this one."""
        offsets = attempt_offsets()
        due = [i for i, offset in enumerate(offsets) if self.finished_at + offset <= now and i > self.last_slot]
        if due:
            return due[-1]
        # A claim without an outcome: its deliverer died mid-POST, so the same
        # slot goes out again (the receiver may see the job twice).
        return self.last_slot if self.claim_owner is not None else self.last_slot + 1

    def claim_attempt(self, *, owner: str, now: float) -> int | None:
        """Take the due attempt for `owner`, provided the claim is still as this
        instance saw it (free, or held by a deliverer found dead). Answers the
        attempt's number (its slot, from 1), or None when another took it."""
        slot = self.slot_due(now)
        as_seen = Q(attempts=self.attempts, last_slot=self.last_slot) & (
            Q(claim_owner=self.claim_owner) if self.claim_owner else Q(claim_owner__isnull=True)
        )
        taken = self._moved(as_seen, last_slot=slot, attempts=self.attempts + 1, claim_owner=owner, claimed_at=now)
        return slot + 1 if taken else None

    def forget(self) -> bool:
        """A client is done with the ended job: it is deleted now. False when
        it is queued or running (or already gone)."""
        deleted, _ = Job.objects.filter(id=self.id).exclude(state__in=Job.LIVE_STATES).delete()
        return bool(deleted)

    def record_final(self, *, owner: str) -> bool:
        """The owner's attempt delivered the job (2xx), or was final (or the
        last): the job is deleted. Its media are the caller's to keep for a
        while or drop, in the same transaction."""
        deleted, _ = Job.objects.filter(id=self.id, claim_owner=owner).delete()
        return bool(deleted)

    def record_retry(self, *, owner: str, error: str) -> bool:
        """The owner's attempt is worth another: free the claim for the next
        slot. False when it was not the owner's (or no slot is left)."""
        offsets = attempt_offsets()
        if self.last_slot + 1 >= len(offsets):
            return False
        return self._moved(
            Q(claim_owner=owner),
            claim_owner=None,
            claimed_at=None,
            last_error=error,
            next_attempt_at=self.finished_at + offsets[self.last_slot + 1],
        )


def attempt_offsets() -> list[float]:
    return sorted(settings.WEBHOOK_ATTEMPTS_S)


def webhook_window() -> float:
    """How long after its end a webhook job may still be delivered: the last
    attempt and its timeout."""
    return attempt_offsets()[-1] + settings.WEBHOOK_TIMEOUT_S


class DeliveryAttemptQuerySet(models.QuerySet):
    def expired(self, now: float) -> DeliveryAttemptQuerySet:
        return self.filter(expires_at__lte=now)

    def of_job(self, job_id: str) -> DeliveryAttemptQuerySet:
        return self.filter(job_id=job_id)

    def with_ids(self, ids: list[int]) -> DeliveryAttemptQuerySet:
        return self.filter(id__in=ids)

    def ids(self, limit: int) -> list[int]:
        return list(self.values_list("id", flat=True)[:limit])


class DeliveryAttempt(models.Model):
    """One webhook POST and how it ended, for the operator (the admin,
    `manage.py jobs <id>`). Kept no longer than its job could be: until the
    end of the job's webhook window (`expires_at`, swept), and deleted with
    a job that a client forgets. The guide keeps nothing past about 10
    minutes after a job's end; neither does the delivery history."""

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
    # Epoch seconds: the end of the job's webhook window (rows from before this field: 0, swept at once).
    expires_at = models.FloatField(default=0, db_index=True)

    objects = DeliveryAttemptQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
