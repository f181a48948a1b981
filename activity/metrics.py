"""`GET /api/v1/metrics`: the worker in the Prometheus text format.

The counters and histograms are core/metrics.py's, fed where things happen.
What is state is read here, when the scrape asks, by `WorkerState`: the pages
from memory, the jobs and media held from the store (one read on the database
thread), the browser's resident memory from /proc (in a thread). So a gauge
shows what is true at the scrape, never a count kept beside the state that
could drift from it.

A scrape is not client activity and is not logged (the gate counts it with the
waker's reads), so a scraper never keeps a sleepy worker awake. The jobs'
figures come in as the view's `jobs_held`, given by the URL configuration,
like the activity route's job counts: this app does not know the jobs app.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from browser.processes import resident_bytes
from browser.registry import PageRegistry
from browser.runner import BrowserState
from core import metrics
from core.api import ApiError
from core.db_thread import on_db_thread
from core.rest import ApiView
from core.runtime import WorkerRuntime, runtime_of
from core.schema import operation
from live.screencast import Casts
from media_store import store as media

METRICS_OFF = "Metrics are off on this worker (METRICS_ENABLED=0)."


@dataclass(frozen=True)
class StoreReading:
    """What a scrape reads from the store."""

    jobs_held: dict[str, int]
    media_files: int
    media_bytes: int


def read_store(jobs_held: Callable[[float], dict[str, int]], now: float) -> StoreReading:
    files, size = media.totals()
    return StoreReading(jobs_held=jobs_held(now), media_files=files, media_bytes=size)


def no_jobs(now: float) -> dict[str, int]:
    return {}


async def no_job_counts() -> tuple[int, int]:
    return 0, 0


class WorkerState(Collector):
    """The worker's state as gauges, read at the scrape: the pages live from
    memory (on the loop), the store and the browser's memory as read for it."""

    def __init__(
        self, runtime: WorkerRuntime, store: StoreReading, browser_bytes: int | None, stay_awake: bool | None = None
    ) -> None:
        self.store = store
        self.browser_bytes = browser_bytes
        self.pages: PageRegistry = runtime.pages
        self.casts: Casts = runtime.casts
        self.requests_in_flight: int = runtime.tracker.requests_in_flight
        self.stay_awake = stay_awake

    def collect(self) -> Iterator[Metric]:
        pages = list(self.pages.pages.values())
        yield GaugeMetricFamily("penelope_pages_open", "Pages (browser tabs) open, main included.", value=len(pages))
        yield GaugeMetricFamily(
            "penelope_pages_busy", "Pages running a call or a job now.", value=sum(1 for page in pages if page.busy)
        )
        yield GaugeMetricFamily(
            "penelope_pages_leased", "Pages under a lease now.",
            value=sum(1 for page in pages if page.lease is not None),
        )
        queued = GaugeMetricFamily(
            "penelope_page_queue_depth", "Jobs queued for a page now (X-Queue-Timeout), by page.", labels=["page_id"]
        )
        for page in pages:
            queued.add_metric([page.name], page.line.jobs_waiting())
        yield queued
        yield GaugeMetricFamily("penelope_pages_max", "Pages that may be open at once (MAX_PAGES).", value=settings.MAX_PAGES)
        yield GaugeMetricFamily("penelope_live_viewers", "Live views open now (sockets on /live/<token>/ws).", value=self.casts.viewers())
        yield GaugeMetricFamily(
            "penelope_live_screencasts", "Pages whose screencast runs now (one per watched page).", value=self.casts.running()
        )
        yield GaugeMetricFamily(
            "penelope_requests_in_flight",
            "Authenticated API requests being answered now, and live views open: both keep a worker awake.",
            value=self.requests_in_flight,
        )
        held = GaugeMetricFamily(
            "penelope_jobs_held", "Jobs held (counted against MAX_JOBS): running, or ended and keeping a result, by state.",
            labels=["state"],
        )
        for state, count in sorted(self.store.jobs_held.items()):
            held.add_metric([state], count)
        yield held
        yield GaugeMetricFamily("penelope_jobs_max", "Jobs that may be held at once (MAX_JOBS).", value=settings.MAX_JOBS)
        yield GaugeMetricFamily("penelope_media_files", "Media files in the store.", value=self.store.media_files)
        yield GaugeMetricFamily("penelope_media_bytes", "Bytes of the media files in the store.", value=self.store.media_bytes)
        browser = self.pages.browser
        up = browser is not None and browser.state == BrowserState.UP
        yield GaugeMetricFamily("penelope_browser_up", "1 while the browser takes calls (health's browser_state up).", value=int(up))
        if self.stay_awake is not None:
            yield GaugeMetricFamily(
                "penelope_stay_awake",
                "1 while the worker must stay awake (a request or a job in flight, a webhook job waiting for "
                "delivery, idle less than IDLE_TIMEOUT_S), else 0: the activity route's stay_awake.",
                value=int(self.stay_awake),
            )
        if self.browser_bytes is not None:
            yield GaugeMetricFamily(
                "penelope_browser_resident_bytes", "Resident memory of the browser's processes, summed (Linux /proc).",
                value=self.browser_bytes,
            )


class MetricsView(ApiView):
    # Jobs held by state at a moment: given by the URL configuration, read on
    # the database thread.
    jobs_held: Callable[[float], dict[str, int]] = staticmethod(no_jobs)
    # (jobs running, webhook jobs waiting for delivery), as the activity route's.
    job_counts: Callable[[], Awaitable[tuple[int, int]]] = staticmethod(no_job_counts)

    if settings.METRICS_PUBLIC:  # for a scraper inside a private network
        authentication_classes = ()
        permission_classes = ()

    @extend_schema(
        **operation(
            operation_id="metrics",
            summary="The worker's metrics, in the Prometheus text format",
            description=(
                "Requests by route and status with their durations, jobs started and ended, jobs held, webhook "
                "attempts and their latency, pages open, busy and leased, media held, the browser's memory, purges. "
                "Text (format 0.0.4), not JSON. Needs the key unless the worker runs with METRICS_PUBLIC=1; a "
                "scrape is not client activity."
            ),
            tags=["activity"],
            public=settings.METRICS_PUBLIC,
            answers={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, "The metrics, one sample a line.")},
            errors={404: METRICS_OFF},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        if not metrics.ENABLED:
            raise ApiError(404, METRICS_OFF)
        runtime = runtime_of(request)
        (store, browser_bytes, (jobs_in_flight, webhooks_pending)) = await asyncio.gather(
            on_db_thread(read_store)(self.jobs_held, time.time()), browser_memory(runtime.pages), self.job_counts()
        )
        stay_awake = runtime.tracker.stays_awake(
            jobs_in_flight=jobs_in_flight,
            webhooks_pending=webhooks_pending,
            idle_timeout_s=settings.IDLE_TIMEOUT_S,
            now=time.time(),
        )
        body = metrics.render(WorkerState(runtime, store, browser_bytes, stay_awake=stay_awake))
        response = HttpResponse(body, content_type=metrics.CONTENT_TYPE)
        response["Content-Length"] = str(len(body))
        return response


async def browser_memory(pages: PageRegistry) -> int | None:
    """The browser's resident memory, or None while it does not run; /proc is
    read in a thread, off the loop."""
    if pages.browser is None or pages.browser.state != BrowserState.UP:
        return None
    return await asyncio.to_thread(resident_bytes)
