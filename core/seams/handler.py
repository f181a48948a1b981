"""Seams on an HTTP request's way to its view, in Django's request handling
and then in DRF's and adrf's: Django's ASGI handler (piece 1), DRF's
request stream (3; piece 2 went back to Django's receivers), adrf's dispatch
(4), a middleware chain outside Django's handler (5), a hook on a
response's close (9) and the Django request under DRF's (10).
docs/design/SEAMS.md says what each replaces or relies on, why, and what it pays.

Imports no DRF views (and with them Django's admin): the waker imports
this package for its bounded requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from adrf.requests import AsyncRequest
from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import HttpRequest, HttpResponseBase
from django.urls import set_script_prefix
from django.utils.module_loading import import_string

# The paths whose requests run without a thread of their own: the API's views
# are async and reach the database through core/db_thread.py only.
THREADLESS_PREFIX = "/api/"


# --- 1. Django's ASGI handler ------------------------------------------------------------


class ThreadlessApiHandler(ASGIHandler):
    """Django's ASGI handler; an /api/ request runs in daphne's own task,
    with no thread of its own and no hop to one (`handle_api`). The admin,
    whose views are sync, keeps Django's way."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"].startswith(THREADLESS_PREFIX):
            await self.handle_api(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def handle_api(self, scope: dict, receive: Callable, send: Callable) -> None:
        """What Django's `handle` does for a request, in one task: the body,
        the request, the middleware and view, the answer, its close. A client
        that disconnects before its answer is sent cancels the view, as with
        Django. Not sent: `request_started`, whose receivers (Django's
        `reset_queries` and `close_old_connections`) tend a request thread's
        connections: an API request has none, it reaches the database
        through core/db_thread.py."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            error_response.close()
            return
        this_task = asyncio.current_task()
        watcher = asyncio.get_running_loop().create_task(_cancel_on_disconnect(receive, this_task))
        response = None
        try:
            response = await self.run_get_response(request)
            await self.send_response(response, send)
        except asyncio.CancelledError:
            # Swallowed only when the client's disconnect was the one cancel:
            # the server's own (its stop) goes on up, even beside a disconnect.
            if not (watcher.done() and not watcher.cancelled() and watcher.result()) or this_task.uncancel():
                raise
        finally:
            watcher.cancel()
            body_file.close()
        if response is None:
            await signals.request_finished.asend(sender=self.__class__)
        else:
            response.close()  # request_finished: the loop's thread holds no connection to close


async def _cancel_on_disconnect(receive: Callable, task: asyncio.Task) -> bool:
    """Cancel `task` when the client disconnects (the only message left once
    the body is read); answers whether it did."""
    if (await receive())["type"] != "http.disconnect":
        return False
    task.cancel()
    return True


# --- 3. and 4. DRF's request, adrf's dispatch --------------------------------------------


class WholeBodyRequest(AsyncRequest):
    def _load_stream(self) -> None:
        # The Django request is the stream, whatever the Content-Length says:
        # a parser reads its `body`, which enforces the size limit.
        self._stream = self._request


class InlineDispatch:
    """Put before adrf's `APIView` in a view's bases: the view is dispatched
    without a thread hop and without DRF's `finalize_response`, and its
    requests are `WholeBodyRequest`s. `response_headers` are set on every
    answer that does not set them itself (in place of
    `default_response_headers`). Every handler must be async, and DRF's
    `initial()` must not wait on anything: it runs on the event loop, which
    is sound while authentication, permissions and throttles read only
    headers and settings (core/auth.py's do; the API has no throttles).

    A mixin, not a subclass of adrf's view, so that importing this module
    does not import DRF's views (and with them Django's admin): the waker
    imports it for its bounded requests."""

    response_headers: dict[str, str] = {}

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        # adrf's asks `view_is_async` each time, which inspects every handler.
        return self.async_dispatch(request, *args, **kwargs)

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> WholeBodyRequest:
        parts = type(self).__dict__.get("_request_parts")
        if parts is None:  # made once per view class: DRF's parsers, authenticators and negotiator hold no state
            parts = (self.get_parsers(), self.get_authenticators(), self.get_content_negotiator())
            type(self)._request_parts = parts
        parsers, authenticators, negotiator = parts
        return WholeBodyRequest(
            request,
            parsers=parsers,
            authenticators=authenticators,
            negotiator=negotiator,
            parser_context=self.get_parser_context(request),
        )

    async def async_dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        self.args, self.kwargs = args, kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = {}
        try:
            self.initial(request, *args, **kwargs)
            method = request.method.lower()
            handler = getattr(self, method) if method in self.http_method_names else self.http_method_not_allowed
            response = await handler(request, *args, **kwargs)
        except Exception as exc:
            response = self.handle_exception(exc)
        for name, value in self.response_headers.items():
            if name not in response:
                response[name] = value
        self.response = response
        return response


# --- 5. a middleware chain outside Django's handler --------------------------------------


class MiddlewareChain:
    """Django middleware (dotted paths, outermost first) around `get_response`,
    for an async middleware that runs them for some requests only. Each class
    must be async-capable (MiddlewareMixin is); a hook other than the
    request/response call and `process_view` would not run (Django's admin
    middleware has none)."""

    def __init__(self, names: Sequence[str], get_response: Callable) -> None:
        chain = get_response
        view_checks: list[Callable] = []
        for name in reversed(names):
            chain = import_string(name)(chain)
            if hasattr(chain, "process_view"):
                view_checks.insert(0, chain.process_view)
        self.chain = chain
        self.view_checks = view_checks

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return await self.chain(request)

    async def process_view(self, request: HttpRequest, view: Any, args: tuple, kwargs: dict) -> HttpResponseBase | None:
        """The chain's `process_view` hooks in order, as Django's handler runs
        them between URL resolution and the view; the first answer wins."""
        for check in self.view_checks:
            response = await sync_to_async(check)(request, view, args, kwargs)
            if response is not None:
                return response
        return None


# --- 9. a response's close -----------------------------------------------------------------


def close_with(response: HttpResponseBase, callback: Callable[[], object]) -> None:
    """Have `callback` run when `response` is closed, which Django's handler
    (and `handle_api`) always does once the answer is sent or abandoned, even
    for a stream that never started. It joins the response's own closers
    (`_resource_closers`, how `FileResponse` closes its file), which `close()`
    runs once each, swallowing their errors."""
    response._resource_closers.append(callback)


# --- 10. the Django request under DRF's -----------------------------------------------------


def django_request_of(request: Any) -> HttpRequest:
    """The Django `HttpRequest` a DRF `Request` wraps (DRF keeps it in
    `_request`): what a parser reads the body from, and where a value cached
    for the whole request goes (DRF's request passes reads on to it, but
    keeps what is set on it for itself)."""
    return request._request
