"""A job as clients see it: the poll's answer, which is also the webhook's
body and what its events on the bus carry (`publish`), and the 202 of a job
start. The serializers render them and describe them in the OpenAPI
document."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rest_framework import serializers

from core.auth import HIDDEN, url_for_log
from core.events import Bus, Event
from core.rest import represent
from core.shapes import JOB_ID_PATTERN, PageSuccess, Success
from jobs.models import Job
from plugins.framework import result_for_reader


class Delivery(serializers.Serializer):
    attempts = serializers.IntegerField(min_value=0, help_text="POSTs made so far.")
    delivered = serializers.BooleanField()
    error = serializers.CharField(allow_null=True, help_text="Why the last attempt failed, or null.")


class Progress(serializers.Serializer):
    done = serializers.IntegerField(min_value=0, allow_null=True, help_text="Items done so far, or null.")
    total = serializers.IntegerField(min_value=0, allow_null=True, help_text="Items in all, or null.")
    message = serializers.CharField(allow_null=True, help_text="The plugin's own words, or null.")
    at = serializers.FloatField(help_text="Epoch seconds of the report.")


class Human(serializers.Serializer):
    reason = serializers.CharField(help_text="What the plugin asks the person to do, in its own words.")
    live_url = serializers.CharField(
        required=False,
        help_text=(
            "`/live/<token>` on the worker: a control link to the page, made for this question and revoked when it "
            "ends. Not shown to a read key."
        ),
    )
    asked_at = serializers.FloatField(help_text="Epoch seconds.")
    expires_at = serializers.FloatField(help_text="Epoch seconds: the plugin goes on without an answer then.")


class QueuePlace(serializers.Serializer):
    position = serializers.IntegerField(min_value=1, allow_null=True, help_text="Its place in the page's line, from 1 (next).")
    enqueued_at = serializers.FloatField(
        help_text="Epoch seconds: when it joined the line (when it was accepted; for a retry, the end of its back-off)."
    )
    timeout_at = serializers.FloatField(help_text="Epoch seconds: when its wait runs out (X-Queue-Timeout).")


def queue_place(job: Job) -> dict[str, Any] | None:
    """Where a queued job waits; None for any other."""
    if job.state != Job.State.QUEUED:
        return None
    return {
        "position": getattr(job, "queue_position", None),
        "enqueued_at": round(job.enqueued_at, 3),
        "timeout_at": round(job.queue_deadline, 3),
    }


class Attempt(serializers.Serializer):
    status = serializers.IntegerField(allow_null=True, help_text="The status it answered, null while it runs.")
    started_at = serializers.FloatField(help_text="Epoch seconds.")
    finished_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds, null while it runs.")


def attempts(job: Job) -> list[dict[str, Any]]:
    """A retried job's attempts: those that ended, then the one running or
    ended last; not one that never ran (a job that ended waiting for it: for
    its first turn, whose start would have set `attempt_started_at`, or after
    a back-off, whose `retry_at` its start would have cleared)."""
    shown = list(job.past_attempts or [])
    if job.state != Job.State.QUEUED and job.retry_at is None and job.attempt_started_at is not None:
        finished_at = round(job.finished_at, 3) if job.finished_at is not None else None
        shown.append({"status": job.status, "started_at": round(job.attempt_started_at, 3), "finished_at": finished_at})
    return shown


# Fields a job shows only when it was started so (as the guide's jobs answer without them).
ONLY_IF_ASKED = {
    # A job that has waited in line (X-Queue-Timeout, or a retry); one that ran at once started when accepted.
    "accepted_at": lambda job: job.queue_deadline is not None,
    "queue": lambda job: job.queue_deadline is not None,  # X-Queue-Timeout
    "attempt": lambda job: job.retries > 0,  # X-Retry
    "attempts": lambda job: job.retries > 0,
    "next_attempt_at": lambda job: job.retries > 0,
    "rerun_of": lambda job: job.rerun_of is not None,  # POST /jobs/{id}/rerun
    "schedule_id": lambda job: job.schedule_id is not None,  # a schedule's fire
}


class JobPoll(PageSuccess):
    """A job as the poll shows it, and as its webhook POSTs it."""

    job_id = serializers.RegexField(JOB_ID_PATTERN)
    state = serializers.ChoiceField(choices=Job.State.values)
    plugin = serializers.CharField(help_text="`family/action`.")
    accepted_at = serializers.FloatField(
        required=False,
        help_text=(
            "Only for a job that has waited in its page's line (X-Queue-Timeout, or a retry): epoch seconds when it "
            "was accepted. A job that ran at once started when it was accepted."
        ),
    )
    started_at = serializers.FloatField(
        allow_null=True,
        help_text=(
            "Epoch seconds when it first took its page (a retry keeps the first); null while a queued job waits "
            "for its first turn."
        ),
    )
    finished_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds, null while it runs.")
    expires_in = serializers.FloatField(min_value=0, allow_null=True, help_text="Seconds it is still held, null while it runs.")
    status = serializers.IntegerField(allow_null=True, help_text="The status the plain call would have answered, null while it runs.")
    result = serializers.DictField(
        allow_null=True,
        help_text=(
            "The body the plain call would have answered (a success or the envelope), null while it runs. "
            "To a read key (PENELOPE_READ_KEYS), each value the action marks secret (a cookie's value) shows as "
            f"`{HIDDEN}`, and `artifacts` is left out."
        ),
    )
    callback = serializers.CharField(
        allow_null=True,
        help_text=(
            "The webhook URL, null for a polling job. To a read key it shows as the logs show it: without its "
            f"user-info, and with `{HIDDEN}` for its query string."
        ),
    )
    delivery = Delivery(allow_null=True, help_text="A webhook job's deliveries so far, null for a polling job.")
    progress = Progress(allow_null=True, help_text="The plugin's last progress report, or null if it made none.")
    queue = QueuePlace(
        allow_null=True, required=False,
        help_text="Only for a job started with X-Queue-Timeout: where it waits while queued, then null.",
    )
    attempt = serializers.IntegerField(
        min_value=1, required=False, help_text="Only with X-Retry: the attempt running (or next to run), from 1."
    )
    attempts = Attempt(
        many=True, required=False,
        help_text="Only with X-Retry: each attempt so far, oldest first; the job's own status and result are the last one's.",
    )
    next_attempt_at = serializers.FloatField(
        allow_null=True, required=False,
        help_text="Only with X-Retry: epoch seconds when an attempt waiting out its back-off goes back in line, else null.",
    )
    rerun_of = serializers.RegexField(
        JOB_ID_PATTERN, required=False, help_text="Only for a re-run (POST /jobs/{job_id}/rerun): the job it re-runs."
    )
    schedule_id = serializers.RegexField(
        JOB_ID_PATTERN, required=False, help_text="Only for a job a schedule fired: the schedule's id."
    )

    human = Human(
        required=False,
        help_text="Only while the job's plugin waits for a person (`ctx.ask_human`): the question and its live link.",
    )
    family_version = serializers.CharField(
        required=False, help_text="Only when the plugin's family declares a version: the version that ran the job."
    )

    def to_representation(self, instance: JobAt) -> dict[str, Any]:
        shown = super().to_representation(instance)
        for name, asked in ONLY_IF_ASKED.items():
            if not asked(instance.job):
                del shown[name]  # a job started without it answers as the guide shows it
        for name in ("human", "family_version"):
            if shown[name] is None:
                del shown[name]
        return shown if instance.acts else for_reader(shown)


def for_reader(shown: dict[str, Any]) -> dict[str, Any]:
    """A job as a read key's poll, list and event socket show it: nothing that
    lets its holder act or pass for the persona. The callback loses its
    user-info and query string (a receiver's credentials), as in the logs;
    the result's values its action marks secret (`secret=` of
    `Family.action`) show as `…`; X-Debug's files (a trace holds the
    persona's cookies and what was typed) and a question's live link are
    left out. `shown`, the full key's view, stays as it is."""
    shown = dict(shown)
    if shown.get("callback"):
        shown["callback"] = url_for_log(shown["callback"])
    result = shown.get("result")
    if isinstance(result, dict):
        result = {name: value for name, value in result.items() if name != "artifacts"}
        shown["result"] = result_for_reader(shown.get("plugin") or "", result)
    human = shown.get("human")
    if isinstance(human, dict):
        shown["human"] = {name: value for name, value in human.items() if name != "live_url"}
    return shown


@dataclass(frozen=True)
class JobAt:
    """A job as seen at `now`: what `JobPoll` renders."""

    job: Job
    now: float
    # Whether whoever reads it may act (a full key); a read key's answers
    # show it as `for_reader` does.
    acts: bool = True
    success = True

    @property
    def page_id(self) -> str:
        return self.job.page_id

    @property
    def job_id(self) -> str:
        return self.job.id

    @property
    def state(self) -> str:
        return self.job.state

    @property
    def plugin(self) -> str:
        return self.job.plugin

    @property
    def accepted_at(self) -> float:
        return round(self.job.accepted_at, 3)

    @property
    def started_at(self) -> float | None:
        return round(self.job.started_at, 3) if self.job.started_at is not None else None

    @property
    def finished_at(self) -> float | None:
        return round(self.job.finished_at, 3) if self.job.finished_at is not None else None

    @property
    def expires_in(self) -> float | None:
        return round(max(0.0, self.job.expires_at - self.now), 3) if self.job.ended else None

    @property
    def status(self) -> int | None:
        return self.job.status

    @property
    def result(self) -> dict | None:
        return self.job.result

    @property
    def callback(self) -> str | None:
        return self.job.callback

    @property
    def delivery(self) -> dict[str, Any] | None:
        if self.job.mode != Job.Mode.WEBHOOK:
            return None
        return {"attempts": self.job.attempts, "delivered": False, "error": self.job.last_error}

    @property
    def progress(self) -> dict[str, Any] | None:
        return self.job.progress

    @property
    def family_version(self) -> str | None:
        return self.job.family_version

    @property
    def queue(self) -> dict[str, Any] | None:
        return queue_place(self.job)

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return attempts(self.job)

    @property
    def next_attempt_at(self) -> float | None:
        return round(self.job.retry_at, 3) if self.job.retry_at is not None and self.job.state == Job.State.QUEUED else None

    @property
    def human(self) -> dict[str, Any] | None:
        return getattr(self.job, "human", None) if not self.job.ended else None

    @property
    def rerun_of(self) -> str | None:
        return self.job.rerun_of

    @property
    def schedule_id(self) -> str | None:
        return self.job.schedule_id


def job_body(job: Job, now: float) -> dict[str, Any]:
    """The job as a poll (and the webhook) shows it."""
    return represent(JobPoll, JobAt(job, now))


class JobEntry(JobPoll):
    """A job in the job list: the poll's shape without its result."""

    result = None


class JobList(Success):
    jobs = JobEntry(many=True, help_text="Newest first.")
    next = serializers.CharField(allow_null=True, help_text="The `cursor` of the next page of the list, or null at its end.")


class JobAccepted(PageSuccess):
    job_id = serializers.RegexField(JOB_ID_PATTERN)
    status_url = serializers.CharField(help_text="Where to poll it: /api/v1/jobs/{job_id}.")
    ttl = serializers.FloatField(allow_null=True, help_text="X-Result-Ttl, null for a webhook job.")
    callback = serializers.CharField(allow_null=True, help_text="X-Callback-Url, null for a polling job.")
    state = serializers.ChoiceField(
        choices=[Job.State.RUNNING, Job.State.QUEUED], required=False,
        help_text="Only with X-Queue-Timeout: `queued` when its page was busy and it waits, else `running`.",
    )
    queue = QueuePlace(
        allow_null=True, required=False, help_text="Only with X-Queue-Timeout: where it waits; null when it runs at once."
    )
    rerun_of = serializers.RegexField(JOB_ID_PATTERN, required=False, help_text="Only for a re-run: the job it re-runs.")

    def to_representation(self, accepted: dict[str, Any]) -> dict[str, Any]:
        shown = super().to_representation(accepted)
        for name in ("queue", "rerun_of"):
            if name not in accepted:
                shown.pop(name, None)  # a start without it answers as the guide shows it
        return shown


def publish(bus: Bus, event: Event, job: Job, **fields: Any) -> None:
    """The job's event on its worker's bus; a socket gets the job as a poll shows it."""
    bus.publish(
        event, page_id=job.page_id, job_id=job.id, job=lambda: job_body(job, time.time()), state=job.state,
        mode=job.mode, **fields,
    )
