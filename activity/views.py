"""Health, activity and workload: what the waker reads."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from activity import log as request_log
from browser.registry import PageRegistry
from core.api import ApiError
from core.db_thread import on_db_thread
from core.numbers import seconds
from core.rest import ApiView, answer
from core.runtime import runtime_of
from core.schema import operation
from core.shapes import ErrorEnvelope, FalseField, Success

DEFAULT_WINDOW_S = 3600.0


BROWSER_STATES = ["starting", "up", "relaunching", "failed"]


class Health(Success):
    status = serializers.ChoiceField(choices=["ok"])
    browser = serializers.BooleanField(help_text="The browser takes calls.")
    browser_state = serializers.ChoiceField(choices=BROWSER_STATES, help_text="Always `up` in a 200.")


class Unhealthy(ErrorEnvelope):
    """503: the browser cannot take a call now."""

    browser = FalseField()
    browser_state = serializers.ChoiceField(
        choices=BROWSER_STATES,
        help_text="`relaunching` (the browser stopped or is recycled: it takes calls again in seconds) or "
        "`failed` (every relaunch failed: the worker is exiting for its supervisor to start it again).",
    )


class Activity(Success):
    requests_in_flight = serializers.IntegerField(min_value=0)
    jobs_in_flight = serializers.IntegerField(min_value=0)
    webhooks_pending = serializers.IntegerField(min_value=0)
    last_activity_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds, null before the first request.")
    idle_seconds = serializers.FloatField(min_value=0, help_text="0 while a request, job or webhook is in flight.")
    busy_pages = serializers.ListField(child=serializers.CharField())
    open_pages = serializers.ListField(child=serializers.CharField(), help_text="Every page open now, busy or not.")
    cdp_connections = serializers.IntegerField(
        min_value=0, help_text="CDP clients connected now (/cdp/<token>); each is also a request in flight."
    )
    stay_awake = serializers.IntegerField(
        min_value=0,
        max_value=1,
        help_text=(
            "1 while the worker must stay awake: a request or a job in flight, a webhook job waiting for "
            "delivery, idle for less than IDLE_TIMEOUT_S, or a schedule's fire due within WAKE_LEAD_S; else 0. "
            "The waker's stop rule; KEDA's metrics-api scaler reads it (valueLocation `stay_awake`)."
        ),
    )
    next_wake_at = serializers.FloatField(
        allow_null=True,
        help_text=(
            "Epoch seconds of the next fire of a schedule that is not paused, null when there is none: when a "
            "supervisor must have the worker running (the waker starts a sleeping worker WAKE_LEAD_S before)."
        ),
    )
    browser_state = serializers.ChoiceField(
        choices=BROWSER_STATES, help_text="As the health check says it; the waker restarts a worker whose browser `failed`."
    )


class Durations(serializers.Serializer):
    p50 = serializers.FloatField()
    p95 = serializers.FloatField()
    max = serializers.FloatField()


class RouteLoad(serializers.Serializer):
    route = serializers.CharField()
    kind = serializers.ChoiceField(choices=[request_log.KIND_HTTP, request_log.KIND_JOB])
    count = serializers.IntegerField(min_value=1)
    statuses = serializers.DictField(child=serializers.IntegerField(min_value=1), help_text="Count per status.")
    duration_ms = Durations()


class Workload(Success):
    window_s = serializers.FloatField()
    since = serializers.FloatField()
    until = serializers.FloatField()
    requests = serializers.IntegerField(min_value=0)
    jobs = serializers.IntegerField(min_value=0)
    routes = RouteLoad(many=True)


def window_parameter() -> OpenApiParameter:
    return OpenApiParameter(
        "window_s",
        {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": settings.REQUEST_LOG_RETENTION_S},
        description=(
            f"The window, in seconds back from now ({DEFAULT_WINDOW_S:g} when absent); at most "
            "REQUEST_LOG_RETENTION_S, as long as the log keeps its rows."
        ),
    )


def browser_state(pages: PageRegistry) -> str:
    return pages.browser.state.value if pages.browser is not None else "starting"


class HealthView(ApiView):
    authentication_classes = ()  # liveness needs no key
    permission_classes = ()

    @extend_schema(
        **operation(
            operation_id="health",
            summary="Whether the worker can take a call; needs no key",
            description=(
                "200 while the browser takes calls; 503 with `browser: false` and `browser_state` while it is "
                "being launched again after a stop, or when it could not be (the worker then exits)."
            ),
            tags=["activity"],
            public=True,
            answers={200: Health, 503: OpenApiResponse(Unhealthy, "The browser cannot take a call now.")},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        pages = runtime_of(request).pages
        state = browser_state(pages)
        if state == "up":
            return answer(Health, {"success": True, "page_id": None, "status": "ok", "browser": True, "browser_state": state})
        if state == "failed":
            error = f"The browser could not be launched again ({pages.browser.failure}); the worker is exiting."
        else:
            error = f"The browser is {state}; it takes calls again in a few seconds."
        body = {"success": False, "error": error, "page_id": None, "browser": False, "browser_state": state}
        return answer(Unhealthy, body, 503)


async def no_jobs() -> tuple[int, int]:
    return 0, 0


class ActivityView(ApiView):
    # (jobs running, webhook jobs waiting for delivery): given by the URL configuration.
    job_counts: Callable[[], Awaitable[tuple[int, int]]] = staticmethod(no_jobs)

    @extend_schema(
        **operation(
            operation_id="activity",
            summary="Requests and jobs in flight, idle time: what the waker reads",
            tags=["activity"],
            answers={200: Activity},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        now = time.time()
        runtime = runtime_of(request)
        tracker = runtime.tracker
        jobs_in_flight, webhooks_pending = await self.job_counts()
        counts = {"jobs_in_flight": jobs_in_flight, "webhooks_pending": webhooks_pending}
        return answer(
            Activity,
            {
                "success": True,
                "page_id": None,
                "requests_in_flight": tracker.requests_in_flight,
                "jobs_in_flight": jobs_in_flight,
                "webhooks_pending": webhooks_pending,
                "last_activity_at": tracker.last_activity_at or None,
                "idle_seconds": tracker.idle_now(**counts, now=now),
                "busy_pages": [name for name, page in runtime.pages.pages.items() if page.busy],
                "open_pages": list(runtime.pages.pages),
                "cdp_connections": runtime.cdp.open,
                "stay_awake": int(tracker.stays_awake(**counts, idle_timeout_s=settings.IDLE_TIMEOUT_S, now=now)),
                "browser_state": browser_state(runtime.pages),
                "next_wake_at": round(tracker.next_wake_at, 3) if tracker.next_wake_at is not None else None,
            },
        )


def window_from(request: Any) -> float:
    raw = request.query_params.get("window_s")
    if raw is None:
        return DEFAULT_WINDOW_S
    window_s = seconds(raw)  # plain decimal: not "１０", "1e1", "nan" or " 10 "
    if window_s is None:
        raise ApiError(400, "Invalid parameter 'window_s': a number of seconds, more than 0.")
    if window_s > settings.REQUEST_LOG_RETENTION_S:
        raise ApiError(
            400,
            f"Invalid parameter 'window_s': at most {settings.REQUEST_LOG_RETENTION_S:g} seconds, "
            "as long as the log keeps its rows (REQUEST_LOG_RETENTION_S).",
        )
    return window_s


class WorkloadView(ApiView):
    @extend_schema(
        **operation(
            operation_id="workload",
            summary="The request log, summarised per route",
            tags=["activity"],
            parameters=[window_parameter()],
            answers={200: Workload},
            errors={400: "`window_s` is not a positive number, or is past REQUEST_LOG_RETENTION_S."},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        window_s = window_from(request)
        # Rows still in the buffer belong to the window too.
        await runtime_of(request).request_log.aflush()
        summary = await on_db_thread(request_log.workload)(window_s=window_s)
        return answer(Workload, {"success": True, "page_id": None, **summary})
