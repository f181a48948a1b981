"""Where the project reaches into its frameworks: every override of a Django,
DRF, adrf or daphne internal, and nothing else.

Each piece below replaces upstream code for a gain that was measured (or,
for two of them, a behaviour the contract needs), and each is an upgrade
hazard: it copies or skips what the upstream code does, so a new upstream
version can change what it relies on without a word. `tests/test_seams.py`
has one test per piece that checks the upstream behaviour itself, so a
version bump that changes it fails there first. Written against Django
5.2.19, djangorestframework 3.18.3, adrf 0.1.14 and daphne 4.2.3 (pinned in
requirements/base.txt), and their dependencies as installed with them:
Twisted 26.10.0, asgiref 3.13.0.

1. `ThreadlessApiHandler` replaces `django.core.handlers.asgi.ASGIHandler.__call__`
   and `handle` (Django 5.2.19) for paths under /api/ with `handle_api`.
   Django's `__call__` opens a `ThreadSensitiveContext` per request, which
   gives each request a thread of its own for its sync steps; its `handle`
   sends `request_started`, runs the view and a disconnect listener as two
   tasks under `asyncio.wait`, and closes the answer through `sync_to_async`
   (a thread hop). `handle_api` runs the view in daphne's own task with one
   watcher task that cancels it on `http.disconnect` (as Django's does), sends
   no `request_started` (its only receiver returns at once for /api/, piece
   2) and closes the answer on the loop. It reuses `read_body`,
   `create_request`, `run_get_response` and `send_response` as they are.
   Gain, docs/BENCHMARKS.md: "Issue 12" table, row "`Thread.start` under
   Django's `ASGIHandler`": 11.4 % of the event loop's samples; "Issue 27",
   "The server's own floor": the close's hop, `request_started` and the two
   tasks were 16 % of the loop's samples at c=32, and with the changes to
   pieces 2 and 4 and the request log's flush the reference went from about
   1,380 to 2,420 requests per second.

2. `keep_request_started_off_api` replaces the two receivers
   `django/db/__init__.py` (Django 5.2.19) connects to `request_started`
   (`reset_queries`, `close_old_connections`) with one async receiver that
   runs them outside /api/ only, and its `close_old_connections` on
   `request_finished` with one that skips the event loop's thread (where
   piece 1 closes an API answer; that thread holds no request's connection).
   With any sync receiver connected, `ASGIHandler.handle`'s
   `request_started.asend()` hops to a thread before every view. Gain,
   docs/BENCHMARKS.md "Issue 12" table, row "`request_started`'s sync
   receivers": one thread hop per request. Timed in process (3,000 sends,
   median, three rounds): 124 to 238 µs with Django's receivers, 32 to 37 µs
   with this one; the reference request (`GET /api/v1/main`) takes 1.14 ms
   at p50 in the last full run.

3. `WholeBodyRequest` replaces `rest_framework.request.Request._load_stream`
   (DRF 3.18.3), which treats a body without a Content-Length (a chunked
   request) as empty, so the parser never sees it. No speed gain: it buys
   behaviour (a chunked JSON body is read, as the contract says; DRF's
   `_request.body` still enforces DATA_UPLOAD_MAX_MEMORY_SIZE), checked by
   tests/test_rest.py::test_a_body_without_a_content_length_is_still_read.

4. `InlineDispatch` (a mixin put before adrf's `APIView`) replaces
   `adrf.views.APIView.async_dispatch` and `initialize_request` (adrf
   0.1.14): DRF's `initial()` (content negotiation, authentication,
   permissions, throttles) runs inline on the event loop, where adrf runs it
   through `sync_to_async`; and DRF's `finalize_response`
   (`rest_framework.views.APIView`, 3.18.3), which would add
   `default_response_headers` (`Allow` on every answer, `Vary`), is skipped:
   the views answer plain `HttpResponse`s and set their own headers. It
   also replaces adrf's `dispatch`, which asks Django's `view_is_async`
   (an inspection of every handler) on each request, and makes a view
   class's parsers, authenticators and negotiator once (DRF makes them per
   request; they hold no state). Gain:
   docs/BENCHMARKS.md has no row for it ("Before and after issue 11" puts
   DRF and adrf together, with this dispatch, under 0.5 % of the samples).
   Timed in process (`AsyncRequestFactory`, a view shaped like the
   reference's, 3,000 requests, median, three rounds): 45 to 48 µs per
   request with this dispatch, 256 to 304 µs with adrf's, against the
   reference's 1.14 ms p50.

5. `MiddlewareChain` replaces, for the admin's middleware only, what
   `django.core.handlers.base.BaseHandler.load_middleware` builds and what
   `_get_response_async` does with it (Django 5.2.19): it chains the classes
   itself and forwards their `process_view` hooks (CSRF's) through
   `sync_to_async`, so `core.middleware.AdminOnly` can run them for /admin/
   alone. Gain, docs/BENCHMARKS.md "Before and after issue 11 (py-spy)", row
   "the admin's six `MiddlewareMixin` middlewares": about 9 % of the
   worker's samples on an API request before, none after.

Pieces 6 and 7 live in core/server_seams.py (daphne and Twisted), and are
imported here.

6. `bound_request_bodies` replaces `daphne.http_protocol.WebRequest` (daphne
   4.2.3), the class `HTTPFactory.buildProtocol` looks up in its module for
   each connection, with a subclass overriding Twisted's
   `twisted.web.http.Request.gotLength` and `handleContentChunk` (Twisted
   26.10.0) and reading the request line from the channel's `_command` and
   `_path`. Gain: memory, not time, so not a row of docs/BENCHMARKS.md: a
   500 MB POST without the key took a worker from 92 MB to 596 MB resident
   before (core/bounded_http.py); tests/test_bounds.py checks the bound on a
   real worker.

7. `bound_request_heads` replaces the protocol daphne's `HTTPFactory` builds
   for each connection (`protocol`, which Twisted 26.10.0's
   `twisted.web.http.HTTPFactory.buildProtocol` calls: it wraps an
   `HTTPChannel` in `_GenericHTTPChannelProtocol`) with the same wrapper
   around a subclass of `HTTPChannel` overriding `lineReceived` (where
   Twisted counts the request line and headers against `totalHeadersSize`
   and answers a bare 400 past it), `LineReceiver.lineLengthExceeded`
   (a line past `MAX_LENGTH`, where Twisted closes the connection without
   a word) and `headerReceived` (where Twisted counts the headers against
   `maxHeaders` in `_receivedHeaderCount` and answers a bare 400 past it).
   No speed gain: it buys behaviour (every request line or header past the
   bound answers 414 with the envelope, and more than 500 headers 400 with
   the envelope, as docs/reference/API.md says), checked by
   tests/test_head_bound.py on a real worker and waker.

8. `insert_row` writes the one-row INSERT that `Model.save(force_insert=True)`
   ends in (`_do_insert`, `QuerySet._insert`, `SQLInsertCompiler`; Django
   5.2.19) itself: the statement made once per model from its concrete
   fields, each value prepared by the fields' public `pre_save` and
   `get_db_prep_save`, as the compiler prepares them. It skips what `save()`
   does around the INSERT (signals, parents, database defaults, the
   update-or-insert choice) and the compiler's work per row: for
   `Job.start`, a model with none of these. Gain, docs/BENCHMARKS.md "Issue
   22: where the 202's time went": the ORM part of a job start's INSERT,
   366 µs with `create()`, 302 µs through `QuerySet._insert`; "Issue 27",
   "A browser step against raw Playwright": a statement made once.

Removed: `ApiView.default_response_headers` (an override of DRF 3.18.3's
`APIView.default_response_headers` returning `{}`). Only DRF's and adrf's
dispatch read that property, and piece 4 replaced both, so it never ran:
no gain to measure, and no answer changes without it.

Relied on, not overridden (tested beside the pieces): core/db_thread.py
keeps one SQLite connection open on its own thread because Django's
connections belong to a thread (`ConnectionHandler.thread_critical`), not to
an asyncio context. It subclasses and patches nothing of Django: it calls
its thread with `run_in_executor` instead of asgiref's `sync_to_async`, a
choice among public APIs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Any

from adrf.requests import AsyncRequest
from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections, connections, reset_queries
from django.http import HttpRequest, HttpResponseBase
from django.urls import set_script_prefix
from django.utils.module_loading import import_string

from core.server_seams import bound_request_bodies, bound_request_heads  # noqa: F401 - pieces 6 and 7

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
        Django. Not sent: `request_started`, whose one receiver returns at once
        for /api/ (piece 2)."""
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
            response.close()  # its receivers do no I/O on the loop (piece 2)


async def _cancel_on_disconnect(receive: Callable, task: asyncio.Task) -> bool:
    """Cancel `task` when the client disconnects (the only message left once
    the body is read); answers whether it did."""
    if (await receive())["type"] != "http.disconnect":
        return False
    task.cancel()
    return True


# --- 2. request_started's receivers -----------------------------------------------------


async def request_started_outside_api(sender: Any, scope: dict | None = None, **kwargs: Any) -> None:
    """Django's own request_started receivers, for the requests that may use
    the database from their thread (the admin's): an API request has no
    connection in a request thread to reset or close."""
    if scope is not None and scope.get("path", "").startswith(THREADLESS_PREFIX):
        return
    await sync_to_async(_reset_and_close)()


def _reset_and_close() -> None:
    reset_queries()
    close_old_connections()


def close_old_connections_off_loop(**kwargs: Any) -> None:
    """Django's request_finished receiver `close_old_connections`, except on
    the event loop's thread: an API request's answer is closed there, and the
    loop's thread holds no request's connection (the API's go through
    core/db_thread.py), while touching one there would be async-unsafe."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a thread of its own (the admin's request): Django's way
        close_old_connections(**kwargs)


def keep_request_started_off_api() -> None:
    """Swap Django's sync request_started receivers for the async one above,
    and request_finished's `close_old_connections` for the one that skips
    the loop's thread (once, before the server runs)."""
    signals.request_started.disconnect(reset_queries)
    signals.request_started.disconnect(close_old_connections)
    signals.request_started.connect(request_started_outside_api, weak=False)
    signals.request_finished.disconnect(close_old_connections)
    signals.request_finished.connect(close_old_connections_off_loop, weak=False)


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


# --- 8. the ORM's INSERT, without save() around it ---------------------------------------


def insert_row(instance: Any) -> None:
    """INSERT `instance` with every column, as `save(force_insert=True)`
    would, and leave it as `save()` leaves a stored instance, except that
    nothing is read back: a field with a `db_default` keeps the value the
    instance holds. Only for a model without parents, signals, an
    auto-incremented key, expressions as values, or fields with a
    placeholder of their own (`get_placeholder`: binary, geometry)."""
    model = type(instance)
    db = model._default_manager.db
    connection = connections[db]
    sql, fields = _insert_statement(model, connection.alias)
    values = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
    instance._state.adding = False
    instance._state.db = db


@functools.cache
def _insert_statement(model: type, alias: str) -> tuple[str, list]:
    """The INSERT of every concrete column of `model`, as Django's compiler
    writes it for one row, made once."""
    from core.db_thread import insert_statement  # here: the waker imports this module, and has no database

    fields = list(model._meta.local_concrete_fields)
    assert not any(hasattr(field, "get_placeholder") for field in fields), "a field with its own placeholder"
    return insert_statement(model, fields, connections[alias]), fields
