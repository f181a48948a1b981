"""Read-only admin pages for operators to browse jobs and webhook attempts."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin, pretty_json, when
from jobs.models import DeliveryAttempt, Job


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("id", "state", "mode", "plugin", "page_id", "started", "finished", "status", "attempts")
    list_filter = ("state", "mode", "plugin", "status")
    search_fields = ("id",)
    fields = (
        "id", "state", "mode", "plugin", "page_id", "started", "finished", "expires", "status", "ttl",
        "callback", "attempts", "last_error", "next_attempt", "claim_owner", "claimed", "idempotency_key",
        "progress_json", "params_json", "result_json", "media_tokens",
    )

    @admin.display(description="started", ordering="started_at")
    def started(self, job: Job) -> str:
        return when(job.started_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished(self, job: Job) -> str:
        return when(job.finished_at)

    @admin.display(description="expires")
    def expires(self, job: Job) -> str:
        return when(job.expires_at)

    @admin.display(description="next attempt")
    def next_attempt(self, job: Job) -> str:
        return when(job.next_attempt_at)

    @admin.display(description="claimed")
    def claimed(self, job: Job) -> str:
        return when(job.claimed_at)

    @admin.display(description="parameters")
    def params_json(self, job: Job) -> str:
        return pretty_json(job.params)

    @admin.display(description="progress")
    def progress_json(self, job: Job) -> str:
        return pretty_json(job.progress)

    @admin.display(description="result")
    def result_json(self, job: Job) -> str:
        return pretty_json(job.result)


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(ReadOnlyAdmin):
    list_display = ("job_id", "number", "outcome", "status_code", "duration_ms", "started", "url")
    list_filter = ("outcome", "status_code")
    search_fields = ("job_id",)

    @admin.display(description="started", ordering="started_at")
    def started(self, attempt: DeliveryAttempt) -> str:
        return when(attempt.started_at)
