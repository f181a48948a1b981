"""Health and activity."""

from __future__ import annotations

import time

from django.http import HttpRequest, HttpResponse

from activity.tracker import tracker
from browser.pages import registry
from penelope_site.api import api_view, json_response


@api_view("GET")
async def health(request: HttpRequest) -> HttpResponse:
    return json_response({"success": True, "page_id": None, "status": "ok", "browser": registry.browser is not None})


@api_view("GET")
async def activity(request: HttpRequest) -> HttpResponse:
    now = time.time()
    return json_response(
        {
            "success": True,
            "page_id": None,
            "requests_in_flight": tracker.requests_in_flight,
            "jobs_in_flight": 0,
            "webhooks_pending": 0,
            "last_activity_at": tracker.last_activity_at or None,
            "idle_seconds": round(tracker.idle_seconds(now), 3),
            "busy_pages": [name for name, page in registry.pages.items() if page.busy],
        }
    )
