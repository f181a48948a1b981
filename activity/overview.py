"""`GET /api/v1/overview` and `/api/v1/overview/jobs`: what the fleet console
shows of a persona, answered by its worker, for a console that reaches the
persona only through its Service (Kubernetes, console/fleet_http.py).

The store's readings are the console's own (console/persona_store.py: the
queries of jobs/, activity/ and schedules/ `store_reads.py`, plain sqlite3,
read-only, in a thread), so a persona reads the same on the waker's console,
which opens its store file, and on a cluster's, which asks here.
The live part is what the waker would otherwise read itself: the pages, the
memory charged to the worker's process tree, its start and its browser.
Both routes are reads of the monitoring kind (activity/middleware.py): they
neither count as client activity nor are logged, so a console polling a
sleepy persona never keeps it awake.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from activity.views import BROWSER_STATES, browser_state
from console import persona_store
from console.persona_store import SCALES
from console.search import SearchInvalid, StoreSearchQuery, job_search
from core.api import ApiError
from core.numbers import MAX_DECIMAL_CHARACTERS, MOMENT_PATTERN
from core.procfs import tree_charged_bytes
from core.rest import ApiView, answer
from core.runtime import runtime_of
from core.schema import operation
from core.shapes import Success
from jobs.store_reads import JOB_STATES


class MomentShape(OpenApiSerializerFieldExtension):
    """`since` and `until` in the schema: a string (epoch seconds or ISO 8601),
    with the pattern the parser holds it to (core.numbers.MOMENT_PATTERN).
    Said here, not on the field, so the waker, which shares the field, imports
    no drf-spectacular."""

    target_class = "console.search.Moment"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "string",
            "pattern": MOMENT_PATTERN,
            "maxLength": MAX_DECIMAL_CHARACTERS,
        }


class JobCounts(serializers.Serializer):
    running = serializers.IntegerField(min_value=0)
    queued = serializers.IntegerField(min_value=0)
    failed_hour = serializers.IntegerField(min_value=0, help_text="Jobs that failed in the last hour (a cancel is no failure).")
    failed_day = serializers.IntegerField(min_value=0, help_text="Jobs that failed in the last 24 hours.")


class RowReading(serializers.Serializer):
    jobs = JobCounts()
    next_fire_at = serializers.FloatField(allow_null=True, help_text="The next fire of a schedule that is not paused.")
    requests_by_hour = serializers.ListField(
        child=serializers.IntegerField(min_value=0), help_text="Calls and jobs per hour, the last 24 hours, oldest first."
    )


class StoredJob(serializers.Serializer):
    id = serializers.CharField()
    plugin = serializers.CharField()
    page_id = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(choices=JOB_STATES)
    status = serializers.IntegerField(allow_null=True)
    accepted_at = serializers.FloatField()
    started_at = serializers.FloatField(allow_null=True)
    finished_at = serializers.FloatField(allow_null=True)
    schedule_id = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True, help_text="The first line of its error, at most 300 characters.")


class StoredSchedule(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    cron = serializers.CharField()
    timezone = serializers.CharField()
    page_id = serializers.CharField(allow_null=True)
    plugin = serializers.CharField()
    paused = serializers.BooleanField()
    next_fire_at = serializers.FloatField(allow_null=True)
    last_fired_at = serializers.FloatField(allow_null=True)
    last_error = serializers.CharField(allow_null=True, allow_blank=True)


class Series(serializers.Serializer):
    start = serializers.FloatField(help_text="Epoch seconds of the first bucket's start.")
    step = serializers.FloatField(help_text="Seconds a bucket.")
    calls_ok = serializers.ListField(child=serializers.IntegerField(min_value=0))
    calls_failed = serializers.ListField(child=serializers.IntegerField(min_value=0))
    jobs_ok = serializers.ListField(child=serializers.IntegerField(min_value=0))
    jobs_failed = serializers.ListField(child=serializers.IntegerField(min_value=0))
    queue = serializers.ListField(child=serializers.IntegerField(min_value=0), help_text="Jobs queued at each bucket's end.")
    wait_p50_s = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="The median wait of the jobs started in each bucket."
    )


class SeriesByScale(serializers.Serializer):
    minute = Series(help_text=f"The last hour, {SCALES['minute'][1]} buckets of a minute.")
    hour = Series(help_text=f"The last day, {SCALES['hour'][1]} buckets of an hour.")


class StoreOverview(serializers.Serializer):
    read_at = serializers.FloatField()
    jobs = JobCounts()
    failures = StoredJob(many=True, help_text="The last day's failed jobs still held, newest first.")
    schedules = StoredSchedule(many=True)
    series = SeriesByScale()


class Live(serializers.Serializer):
    memory_bytes = serializers.IntegerField(
        min_value=0, help_text="Memory charged to the worker, its driver and its browser (proportional set size)."
    )
    busy_pages = serializers.ListField(child=serializers.CharField())
    open_pages = serializers.ListField(child=serializers.CharField())
    started_at = serializers.FloatField(help_text="Epoch seconds: when this worker process started.")
    browser_state = serializers.ChoiceField(choices=BROWSER_STATES)


class Overview(Success):
    row = RowReading()
    overview = StoreOverview()
    live = Live()


class StoredJobs(Success):
    jobs = StoredJob(many=True, help_text="Newest first (by acceptance), at most `limit`.")


class OverviewView(ApiView):
    @extend_schema(
        **operation(
            operation_id="overview",
            summary="What the fleet console shows of this persona: its store's readings and its live figures",
            description=(
                "The jobs running, queued and failed, the schedules, the calls and jobs per minute and per hour, "
                "and the pages and memory now. A read key reads it; it is not client activity and is not logged."
            ),
            tags=["activity"],
            answers={200: Overview},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        runtime = runtime_of(request)
        await runtime.request_log.aflush()  # the log's rows still in memory count too
        now, store = time.time(), settings.STORE_DIR
        row, overview, memory = await asyncio.gather(
            asyncio.to_thread(persona_store.row_reading, store, now),
            asyncio.to_thread(persona_store.overview, store, now),
            asyncio.to_thread(tree_charged_bytes, os.getpid()),
        )
        pages = runtime.pages.pages
        live = {
            "memory_bytes": memory,
            "busy_pages": [name for name, page in pages.items() if page.busy],
            "open_pages": list(pages),
            "started_at": runtime.tracker.started_at,
            "browser_state": browser_state(runtime.pages),
        }
        return answer(Overview, {"success": True, "page_id": None, "row": row, "overview": overview, "live": live})


class OverviewJobsView(ApiView):
    @extend_schema(
        **operation(
            operation_id="overviewJobs",
            summary="This persona's jobs that match, read from its store, for the fleet console's search",
            description=(
                "Every job the store holds, newest first, filtered by id, plugin, state and acceptance time. "
                "A parameter it does not take, or a blank one, answers 400 naming it. Not client activity, not logged."
            ),
            tags=["activity"],
            parameters=[StoreSearchQuery],
            answers={200: StoredJobs},
            errors={400: "An unknown parameter, or a value it cannot use; the sentence names it."},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        try:
            search = job_search(dict(request.query_params.items()))
        except SearchInvalid as error:
            raise ApiError(400, str(error)) from None
        jobs = await asyncio.to_thread(persona_store.search_jobs, settings.STORE_DIR, search)
        return answer(StoredJobs, {"success": True, "page_id": None, "jobs": jobs})
