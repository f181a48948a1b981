"""The words of the API's paths under /api/v1/, written once.

A path's first segment is either one of the router's own words or a page id,
so the page ids a client may choose are whatever these words leave
(`RESERVED_PAGE_IDS`). The page model refuses them, the OpenAPI document
describes them, and the API's gate and request log name routes with them:
all from this one list, so a new route cannot be taken by a page id.
"""

from __future__ import annotations

# First path segments: /api/v1/<word>[/...].
HEALTH = "health"
ACTIVITY = "activity"
WORKLOAD = "workload"
METRICS = "metrics"
PURGE = "purge"
SCHEMA = "schema"
PAGES = "pages"
MEDIA = "media"
JOBS = "jobs"
PRESSURE = "pressure"
OVERVIEW = "overview"  # what the fleet console shows of the persona (activity/overview.py)
SCHEDULES = "schedules"  # cron schedules that start jobs (schedules/)
CREDENTIALS = "credentials"  # a persona's credentials, sealed (credentials/)
ANY = "any"  # a plugin call on whichever page is free (browser/pool.py)
EVENTS = "events"  # the WebSocket route (penelope_site/asgi.py)

RESERVED_PAGE_IDS = frozenset(
    {
        HEALTH, ACTIVITY, WORKLOAD, METRICS, PRESSURE, PURGE, SCHEMA, PAGES, MEDIA, JOBS, SCHEDULES, CREDENTIALS,
        EVENTS, ANY, OVERVIEW,
    }
)

# Segments after a page id: /api/v1/<page_id>/<word>/...
LEASE = "lease"
PLUGIN = "plugin"
PRIMITIVE = "primitive"
LIVE = "live"  # /api/v1/<page_id>/live: links to a page's live view (live/)
CDP = "cdp"  # /api/v1/<page_id>/cdp: a token for a CDP client on a leased page (cdp/)
