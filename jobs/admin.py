"""Read-only admin pages for operators to browse jobs and webhook attempts."""

from __future__ import annotations

import json
import time

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import get_script_prefix, path, reverse
from django.utils.html import format_html, format_html_join

from core.admin_base import ReadOnlyAdmin, pretty_json, when
from core.runtime import runtime_of
from jobs.models import DeliveryAttempt, Job
from media_store import store

EXPIRED = "expired, removed at the next sweep"


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = (
        "id", "state", "queue", "mode", "plugin", "family_version", "page_id", "accepted", "started", "finished", "status",
        "tries", "attempts", "held_until",
    )
    list_filter = ("state", "mode", "plugin", "status")
    # `params` is a JSONField: on SQLite its text, so `params__icontains`
    # finds a word anywhere in the parameters (keys too).
    search_fields = ("id", "plugin", "params")
    fields = (
        "id", "state", "queue", "priority", "queued_until", "mode", "plugin", "family_version", "page_id", "accepted",
        "started", "finished",
        "expires", "status", "ttl",
        "callback", "attempts", "last_error", "next_attempt", "claim_owner", "claimed", "idempotency_key",
        "tries", "next_try", "past_attempts_json", "rerun_of", "schedule_id", "live_view", "debug", "artifact_links",
        "progress_json", "params_json", "result_json", "media_tokens",
    )

    def get_search_results(self, request, queryset, search_term):
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        if not search_term.isascii():
            # The parameters are stored as JSON with non-ASCII characters
            # escaped (`caf\u00e9`): such a term is also looked for as stored.
            stored_term = "".join(char if char.isascii() else json.dumps(char)[1:-1] for char in search_term)
            escaped, escaped_duplicates = super().get_search_results(request, queryset, stored_term)
            results, may_have_duplicates = results | escaped, may_have_duplicates or escaped_duplicates
        return results, may_have_duplicates

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Job | None:
        """The job as stored; for one running on this worker, with its plugin's
        last progress report, which the worker keeps in memory until the job's
        end stores it (a dict read: this view runs in a thread, not on the loop)."""
        job = super().get_object(request, object_id, from_field)
        if job is not None and job.state == Job.State.RUNNING:
            run = runtime_of(request).jobs.running.get(job.id)
            if run is not None:
                job.progress = run.progress
        return job

    def get_urls(self):
        live = path("<str:job_id>/live/", self.admin_site.admin_view(self.open_live_view), name="jobs_job_live")
        artifact = path(
            "<str:job_id>/artifact/<str:name>/", self.admin_site.admin_view(self.open_artifact), name="jobs_job_artifact"
        )
        return [live, artifact, *super().get_urls()]

    @admin.display(description="artifacts")
    def artifact_links(self, job: Job) -> str:
        """What the run left behind (X-Debug): each file opens from here, while the job holds it."""
        kept = job_artifacts(job)
        if not kept:
            return "-"
        return format_html_join(
            " · ", '<a href="{}">{}</a>',
            ((reverse("admin:jobs_job_artifact", args=[job.id, name]), name) for name in kept),
        )

    def open_artifact(self, request: HttpRequest, job_id: str, name: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        job = get_object_or_404(Job, pk=job_id)
        token = job_artifacts(job).get(name)
        item = store.find_available(token) if token in job.media_tokens else None
        if item is None:
            raise Http404(f"Job {job.id} holds no {name} now: it was never kept, or its hold is over.")
        try:
            file = open(store.file_path(item), "rb")  # noqa: SIM115 - FileResponse closes it
        except FileNotFoundError:  # swept since it was looked up
            raise Http404(f"Job {job.id} holds no {name} now: its hold is over.") from None
        response = FileResponse(
            file, content_type=item.content_type,
            as_attachment=not item.content_type.startswith("image/"), filename=item.filename,
        )
        # The page's own HTML and scripts never run in the admin's origin.
        response["Content-Security-Policy"] = "sandbox"
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "no-store"
        return response

    @admin.display(description="live view")
    def live_view(self, job: Job) -> str:
        """A running job's page, live: the link makes a control link (15 minutes) and opens it."""
        if job.state != Job.State.RUNNING:
            return "-"
        return format_html(
            '<a href="{}" target="_blank" rel="noopener noreferrer">Watch and drive page {} live</a>',
            reverse("admin:jobs_job_live", args=[job.id]), job.page_id,
        )

    def open_live_view(self, request: HttpRequest, job_id: str) -> HttpResponse:
        if not self.has_view_permission(request):  # a control link acts as the persona: staff alone is not enough
            raise PermissionDenied
        job = get_object_or_404(Job, pk=job_id)
        url = async_to_sync(runtime_of(request).links.operator_link)(job.page_id) if job.state == Job.State.RUNNING else None
        if url is None:
            return HttpResponse(
                f"Job {job.id} is not running on an open page now: there is nothing to watch.", status=404,
                content_type="text/plain; charset=utf-8",
            )
        # The link's path is the worker's own: under the request's root path
        # (`/w/{persona}/` through the waker, which forwards live/ there).
        return HttpResponseRedirect(get_script_prefix() + url.removeprefix("/"))

    @admin.display(description="queue")
    def queue(self, job: Job) -> str:
        """A queued job's place among the jobs queued for its page (X-Queue-Timeout)."""
        if job.state != Job.State.QUEUED:
            return "-"
        return f"#{Job.objects.queued_ahead_of(job) + 1}, priority {job.priority}"

    @admin.display(description="attempt")
    def tries(self, job: Job) -> str:
        """A job started with X-Retry: the attempt running (or next), of how many at most."""
        return f"{job.attempt} of {job.retries + 1}" if job.retries else "-"

    @admin.display(description="next attempt at")
    def next_try(self, job: Job) -> str:
        """While a retry waits out its back-off: when it goes back in line."""
        return when(job.retry_at) if job.state == Job.State.QUEUED else "-"

    @admin.display(description="past attempts")
    def past_attempts_json(self, job: Job) -> str:
        return pretty_json(job.past_attempts)

    @admin.display(description="queued until")
    def queued_until(self, job: Job) -> str:
        return when(job.queue_deadline)

    @admin.display(description="accepted", ordering="accepted_at")
    def accepted(self, job: Job) -> str:
        return when(job.accepted_at)

    @admin.display(description="started", ordering="started_at")
    def started(self, job: Job) -> str:
        """When it first took a page: nothing while a queued job waits for its first turn."""
        return when(job.started_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished(self, job: Job) -> str:
        return when(job.finished_at)

    @admin.display(description="expires")
    def expires(self, job: Job) -> str:
        return when(job.expires_at)

    @admin.display(description="held until", ordering="expires_at")
    def held_until(self, job: Job) -> str:
        """When its result goes; a job past it stays listed until the next sweep, and says so."""
        if job.expires_at is None:
            return "-"
        if job.expires_at <= time.time():
            return EXPIRED
        return when(job.expires_at)

    @admin.display(description="next webhook attempt")
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
        return pretty_json(job.progress) if job.progress is not None else "-"

    @admin.display(description="result")
    def result_json(self, job: Job) -> str:
        return pretty_json(job.result)


def job_artifacts(job: Job) -> dict[str, str]:
    """The media tokens of the artifacts in a job's result, by name."""
    artifacts = (job.result or {}).get("artifacts") if isinstance(job.result, dict) else None
    if not isinstance(artifacts, dict):
        return {}
    return {
        name: link["url"].rsplit("/", 1)[-1] for name, link in artifacts.items()
        if isinstance(link, dict) and isinstance(link.get("url"), str)
    }


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(ReadOnlyAdmin):
    list_display = ("job_id", "number", "outcome", "status_code", "duration", "started", "url")
    list_filter = ("outcome", "status_code")
    search_fields = ("job_id",)

    @admin.display(description="duration (ms)", ordering="duration_ms")
    def duration(self, attempt: DeliveryAttempt) -> str:
        return f"{attempt.duration_ms:.1f}"

    @admin.display(description="started", ordering="started_at")
    def started(self, attempt: DeliveryAttempt) -> str:
        return when(attempt.started_at)
