"""Health, activity and workload: what the waker reads."""

from __future__ import annotations

import math
import time

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from activity import log as request_log
from activity import tracker as tracking
from browser.pages import registry
from penelope_site.api import ApiError, api_view, json_response

DEFAULT_WINDOW_S = 3600.0


@api_view("GET")
async def health(request: HttpRequest) -> HttpResponse:
    return json_response({"success": True, "page_id": None, "status": "ok", "browser": registry.browser is not None})


@api_view("GET")
async def activity(request: HttpRequest) -> HttpResponse:
    now = time.time()
    tracker = tracking.tracker
    jobs_in_flight, webhooks_pending = await tracking.current_job_counts()
    working = tracker.requests_in_flight or jobs_in_flight or webhooks_pending
    return json_response(
        {
            "success": True,
            "page_id": None,
            "requests_in_flight": tracker.requests_in_flight,
            "jobs_in_flight": jobs_in_flight,
            "webhooks_pending": webhooks_pending,
            "last_activity_at": tracker.last_activity_at or None,
            # A worker with work in flight is not idle, however long ago the
            # work began.
            "idle_seconds": 0.0 if working else round(tracker.idle_seconds(now), 3),
            "busy_pages": [name for name, page in registry.pages.items() if page.busy],
        }
    )


def window_from(request: HttpRequest) -> float:
    raw = request.GET.get("window_s")
    if raw is None:
        return DEFAULT_WINDOW_S
    try:
        window_s = float(raw)
    except ValueError:
        window_s = math.nan
    if not math.isfinite(window_s) or window_s <= 0:
        raise ApiError(400, "Invalid parameter 'window_s': a number of seconds, more than 0.")
    return window_s


@api_view("GET")
async def workload(request: HttpRequest) -> HttpResponse:
    window_s = window_from(request)
    # Rows still in the buffer belong to the window too.
    await request_log.aflush()
    summary = await sync_to_async(request_log.workload)(window_s=window_s)
    return json_response({"success": True, "page_id": None, **summary})
