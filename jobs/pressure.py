"""`GET /api/v1/pressure`: how loaded the worker is, for a scheduler deciding
where to send work. Pages and jobs come from memory (the registry and the
job runner); the jobs held are one indexed count. Not client activity: a
scheduler that watches a sleepy worker does not keep it awake."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from browser.runner import BrowserState
from core.db_thread import on_db_thread
from core.rest import ApiView, answer
from core.schema import operation
from core.shapes import Success
from jobs.models import Job
from jobs.runner import JobRunner
from jobs.selectors import count_held
from jobs.starting import runner_of


class PageCounts(serializers.Serializer):
    open = serializers.IntegerField(min_value=0, help_text="Pages open.")
    max = serializers.IntegerField(min_value=1, help_text="MAX_PAGES.")
    busy = serializers.IntegerField(min_value=0, help_text="Pages a call or a job holds.")
    leased = serializers.IntegerField(min_value=0, help_text="Pages under a lease.")
    idle = serializers.IntegerField(min_value=0, help_text="Pages neither busy nor leased.")


class PressureShape(Success):
    pages = PageCounts()
    running = serializers.IntegerField(min_value=0, help_text="Jobs running on this worker.")
    queued = serializers.IntegerField(min_value=0, help_text="Jobs waiting for their page (X-Queue-Timeout).")
    oldest_queued_s = serializers.FloatField(allow_null=True, help_text="Seconds the longest-waiting job has waited, or null.")
    jobs_held = serializers.IntegerField(min_value=0, help_text="Jobs counted against MAX_JOBS.")
    max_jobs = serializers.IntegerField(min_value=1, help_text="MAX_JOBS.")
    rejected_last_minute = serializers.IntegerField(
        min_value=0, help_text="Job starts refused in the last 60 s: a busy page (409), a full queue (429), MAX_JOBS (503)."
    )
    accepting = serializers.BooleanField(help_text="Whether a job start can be taken now: the browser is up and MAX_JOBS is not reached.")


def pressure(runner: JobRunner, jobs_held: int) -> dict[str, Any]:
    now = time.time()
    pages = list(runner.pages.pages.values())
    leased = sum(1 for page in pages if page.lease is not None)
    busy = sum(1 for page in pages if page.busy)
    idle = sum(1 for page in pages if not page.busy and page.lease is None)
    runs = list(runner.running.values())
    queued = [run.job.enqueued_at for run in runs if run.job.state == Job.State.QUEUED]
    browser = runner.pages.browser
    return {
        "success": True,
        "page_id": None,
        "pages": {"open": len(pages), "max": settings.MAX_PAGES, "busy": busy, "leased": leased, "idle": idle},
        "running": len(runs) - len(queued),
        "queued": len(queued),
        "oldest_queued_s": round(now - min(queued), 3) if queued else None,
        "jobs_held": jobs_held,
        "max_jobs": settings.MAX_JOBS,
        "rejected_last_minute": runner.refusals.last_minute(),
        "accepting": browser is not None and browser.state == BrowserState.UP and jobs_held < settings.MAX_JOBS,
    }


class PressureView(ApiView):

    @extend_schema(
        **operation(
            operation_id="getPressure",
            summary="How loaded the worker is",
            description=(
                "Pages, jobs running and queued, the oldest wait, the jobs held against MAX_JOBS, the starts "
                "refused in the last minute, and whether a start can be taken now. A read key may read it; it "
                "does not count as client activity."
            ),
            tags=["jobs"],
            answers={200: PressureShape},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        held = await on_db_thread(count_held)(time.time())
        return answer(PressureShape, pressure(runner_of(request), held))
