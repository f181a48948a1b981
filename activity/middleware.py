"""The API's accounting: client activity, requests in flight, the request log
and the metrics of each request. It refuses nothing (the views do).

Async-native and on the event loop: a request pays no thread hop here, and
the log row is appended to an in-memory buffer. Only requests that carry
the key count: the others are refused by the view's authentication class
(core/auth.py) and cost neither activity nor a log row, so a client without
the key can neither keep a sleepy worker awake nor write to its store.
Nor does a read key's request keep it awake: only the full key's count as
client activity and in flight; a read key's are logged and measured alone.

Each request's end is also the metrics' one hook for requests
(`core.metrics.observe_request`): counted under its route, the request log's
name for it, and its status. Job polls count there too, though the log
leaves them out."""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from activity import log as request_log
from core import metrics
from core.api import API_PREFIX
from core.auth import FULL, key_matches, request_role
from core.routes import ACTIVITY, HEALTH, JOBS, MEDIA, METRICS, OVERVIEW, PLUGIN, PRESSURE, PRIMITIVE, WORKLOAD
from core.runtime import runtime_of
from core.seams import close_with
from plugins.framework import find_action
from plugins.primitives import primitives

HEALTH_PATH = API_PREFIX + HEALTH
ACTIVITY_PATH = API_PREFIX + ACTIVITY
WORKLOAD_PATH = API_PREFIX + WORKLOAD
METRICS_PATH = API_PREFIX + METRICS
PRESSURE_PATH = API_PREFIX + PRESSURE
OVERVIEW_PATH = API_PREFIX + OVERVIEW
OVERVIEW_JOBS_PATH = f"{OVERVIEW_PATH}/{JOBS}"
# The waker's reads, a metrics scraper's, a scheduler's look at the
# pressure and a fleet console's (the overview and its job search). Counting
# them as activity would keep a sleepy worker awake forever, and logging
# them would fill the log with the readers themselves.
MONITORING_PATHS = frozenset({ACTIVITY_PATH, WORKLOAD_PATH, METRICS_PATH, PRESSURE_PATH, OVERVIEW_PATH, OVERVIEW_JOBS_PATH})
# The metrics' route for a plugin action or a primitive the worker does not
# have: a client can put anything in a URL, and a label takes a bounded set.
UNKNOWN_PLUGIN = f"{PLUGIN}/(unknown)"
UNKNOWN_PRIMITIVE = f"{PRIMITIVE}/(unknown)"
JOBS_PATH = API_PREFIX + JOBS
# The status logged for a request whose client went away before its answer
# (nginx's convention).
CLIENT_CLOSED = 499


def is_poll(request: HttpRequest) -> bool:
    """A job poll: client activity, but not work, so not logged."""
    path = request.path
    return request.method in ("GET", "HEAD") and (path == JOBS_PATH or path.startswith(JOBS_PATH + "/"))


@functools.cache
def route_name(pattern: str) -> str:
    """A URL pattern as the API reference writes its route: `{page_id}/lease`
    for `<str:page_id>/lease`. One per pattern, so cached."""
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", pattern.removeprefix(API_PREFIX.lstrip("/")))


def route_of(request: HttpRequest) -> str:
    """The route a request is logged under: `plugin/<family>/<action>`,
    `primitive/<name>`, or the route under /api/v1/ as the API reference
    writes it (`{page_id}/lease`, `jobs/{job_id}`)."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "(no route)"
    if match.url_name == "plugin":
        return request_log.plugin_route(match.kwargs["family"], match.kwargs["action"])
    if match.url_name == "no_route":
        return "(no route)"
    if match.url_name == "primitive":
        return f"{PRIMITIVE}/{match.kwargs['name'][:64]}"
    return route_name(match.route)


def metrics_route(request: HttpRequest, route: str) -> str:
    """`route` as the metrics label it: unknown actions and primitives as one
    route each, so the label's values are bounded by the worker's own."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return route
    if match.url_name == "plugin" and find_action(match.kwargs["family"], match.kwargs["action"]) is None:
        return UNKNOWN_PLUGIN
    if match.url_name == "primitive" and match.kwargs["name"] not in primitives.actions:
        return UNKNOWN_PRIMITIVE
    return route


def logged_path(request: HttpRequest) -> str:
    """The request's path, without a media token: a token is a download right."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.url_name == "media":
        return f"{API_PREFIX}{MEDIA}/<token>"
    return request.path


class ApiAccountingMiddleware:
    async_capable = True
    sync_capable = False

    def __init__(self, get_response):
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if not path.startswith(API_PREFIX) or path == HEALTH_PATH:
            return await self.get_response(request)
        if path in MONITORING_PATHS or not key_matches(request):
            return await self.get_response(request)
        # A read key's requests (a dashboard's, a monitor's) are not a
        # client's work: they neither reset the idle clock nor count in
        # flight, so a long-poll or a list every few seconds never keeps a
        # sleepy worker awake. They are logged and measured as any other.
        counted = request_role(request) == FULL
        runtime = runtime_of(request)
        if counted:
            runtime.tracker.touch()
            runtime.tracker.requests_in_flight += 1
        end = self._ender(runtime, request, logged=not is_poll(request), counted=counted)
        try:
            response = await self.get_response(request)
        except asyncio.CancelledError:
            end(CLIENT_CLOSED)
            raise
        except BaseException:
            end(500)
            raise
        if response.streaming and response.is_async:
            # A download is in flight, and its duration runs, until its last byte.
            length = response.get("Content-Length")
            response.streaming_content = _until_sent(
                response.streaming_content, end, response.status_code, int(length) if length else None
            )
            # A client gone before the stream even started leaves the generator
            # unstarted (its `finally` never runs), but the response is always
            # closed (on the loop for /api/, core/seams/; in a thread by
            # Django's own handler): end then, on the loop.
            loop = asyncio.get_running_loop()
            close_with(response, lambda: loop.call_soon_threadsafe(end, CLIENT_CLOSED))
        else:
            end(response.status_code)
        return response

    @staticmethod
    def _ender(runtime: Any, request: HttpRequest, *, logged: bool, counted: bool) -> Callable[[int], None]:
        started_at = time.time()
        began = time.perf_counter()
        ended = False

        def end(status: int) -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            if counted:
                runtime.tracker.requests_in_flight -= 1
                runtime.tracker.touch()
            duration_s = time.perf_counter() - began
            if not (logged or metrics.ENABLED):
                return
            route = route_of(request)
            if metrics.ENABLED:
                metrics.observe_request(metrics_route(request, route), status, duration_s)
            if logged:
                match = getattr(request, "resolver_match", None)
                runtime.request_log.record(
                    method=request.method or "",
                    route=route,
                    path=logged_path(request),
                    page_id=match.kwargs.get("page_id") if match else None,
                    status=status,
                    started_at=started_at,
                    duration_ms=duration_s * 1000,
                )

        return end


async def _until_sent(
    content: AsyncIterator[bytes], end: Callable[[int], None], status: int, length: int | None
) -> AsyncIterator[bytes]:
    """The stream, ended with its status once its last byte is sent, or 499
    if its client went first. A client that has its `length` bytes may close
    at once (curl does), while the stream still works after its last byte (a
    media link is claimed then): that download was answered all the same."""
    completed = False
    sent = 0
    try:
        async for chunk in content:
            yield chunk
            sent += len(chunk)
        completed = True
    finally:
        end(status if completed or (length is not None and sent >= length) else CLIENT_CLOSED)
