"""The framework seams (core/seams/): for each override of a Django, DRF,
adrf, daphne or Twisted internal, and each private name of theirs the
project reads, the upstream behaviour it relies on, checked on the
installed versions, beside what the seam makes of it.

When one of these fails after an upgrade, the upstream code changed under
the seam: read its new version (the test's docstring names it), then
adapt the seam, or remove it if upstream now does what it did, and
update docs/design/SEAMS.md (the version, and the gain if it moved). Every
assertion's message names its seam and what upstream changed (checked last).
All in process, no browser, no server."""

from __future__ import annotations

import ast
import asyncio
import contextvars
import inspect
import queue
import re
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from adrf.views import APIView as AdrfView
from asgiref.sync import SyncToAsync, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import OperationalError, connections
from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.test import AsyncRequestFactory
from django.urls import path
from django.utils.module_loading import import_string
from rest_framework.parsers import JSONParser
from rest_framework.request import Request

from core import seams
from core.api import json_response
from core.rest import ApiView, JsonObjectBody
from harness.worker import wait_until

factory = AsyncRequestFactory()


def thread_name() -> str:
    return threading.current_thread().name


# --- 1. Django's ASGI handler ------------------------------------------------------------


def recording(handler_class: type[ASGIHandler]) -> tuple[ASGIHandler, list[tuple[object, str]]]:
    """A handler of `handler_class` whose `handle` (and `handle_api`) records
    the request's thread-sensitive context and the thread its sync steps would
    run on."""
    seen: list[tuple[object, str]] = []

    class Recording(handler_class):
        async def handle(self, scope, receive, send):
            seen.append((SyncToAsync.thread_sensitive_context.get(None), await sync_to_async(thread_name)()))

        handle_api = handle

    return Recording(), seen


async def request(handler: ASGIHandler, path: str) -> None:
    await handler({"type": "http", "path": path}, None, None)


async def test_django_gives_each_request_a_thread_of_its_own_and_the_api_is_spared_it():
    """Django 5.2's `ASGIHandler.__call__` opens a `ThreadSensitiveContext`
    per request, then calls `self.handle(scope, receive, send)`; asgiref
    gives each such context a thread for its sync steps.
    `ThreadlessApiHandler` calls `handle_api` itself for /api/, outside any
    such context. If this fails, read `ASGIHandler.__call__` and `handle` of
    the new Django: if `__call__` no longer opens a context per request,
    remove the override."""
    django_handler, django_seen = recording(ASGIHandler)
    await request(django_handler, "/api/v1/main")
    await request(django_handler, "/api/v1/main")
    (first_context, first_thread), (second_context, second_thread) = django_seen
    assert first_context is not None and second_context is not None and first_context is not second_context, (
        "seam 1 ThreadlessApiHandler: Django's ASGIHandler.__call__ no longer opens a ThreadSensitiveContext per request"
    )
    assert first_thread != second_thread, (  # a thread started for each request
        "seam 1 ThreadlessApiHandler: Django's ASGIHandler no longer gives each request a thread of its own"
    )

    ours, our_seen = recording(seams.ThreadlessApiHandler)
    await request(ours, "/api/v1/main")
    await request(ours, "/api/v1/jobs")
    await request(ours, "/admin/")
    (api_context, api_thread), (other_api_context, other_api_thread), (admin_context, _) = our_seen
    assert api_context is None and other_api_context is None, (
        "seam 1 ThreadlessApiHandler: an /api/ request got a context"
    )
    assert api_thread == other_api_thread, (
        "seam 1 ThreadlessApiHandler: /api/ requests no longer share asgiref's thread"
    )
    assert admin_context is not None, "seam 1 ThreadlessApiHandler: the admin no longer goes Django's way"


async def answered(handler: ASGIHandler, path: str, receive=None) -> tuple[list[dict], list[str]]:
    """One ASGI request through `handler`: what it sent, and the threads
    request_finished's receivers ran on."""
    sent: list[dict] = []
    finished_on: list[str] = []

    def finished(sender, **kwargs):
        finished_on.append(thread_name())

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": path, "method": "GET", "headers": [], "query_string": b""}
    signals.request_finished.connect(finished)
    try:
        await handler(scope, receive or request_then_nothing(), send)
    finally:
        signals.request_finished.disconnect(finished)
    return sent, finished_on


@pytest.fixture
def waiting_view(settings):
    """/api/v1/waits: a view that waits until it is cancelled (the events it
    sets say when it started and that it was cancelled), with no middleware."""
    settings.ROOT_URLCONF = __name__
    settings.MIDDLEWARE = []
    WAITS.update(started=asyncio.Event(), cancelled=asyncio.Event())
    return WAITS


async def test_an_api_answer_is_closed_on_the_loop_and_a_django_answer_on_a_thread(settings):
    """Django 5.2's `handle` closes each answer with
    `sync_to_async(response.close)`, so request_finished's receivers run on a
    thread: one hop per request. `handle_api` sends the same messages and
    closes the answer on the loop's own thread. If this fails, read
    `ASGIHandler.handle` and `send_response` of the new Django."""
    settings.ROOT_URLCONF = __name__
    settings.MIDDLEWARE = []
    django_sent, django_finished = await answered(ASGIHandler(), "/api/v1/plain")
    our_sent, our_finished = await answered(seams.ThreadlessApiHandler(), "/api/v1/plain")
    assert django_sent == our_sent, "seam 1 ThreadlessApiHandler: Django's ASGIHandler.handle sends other messages now"
    assert our_sent[0]["status"] == 200 and our_sent[1]["body"] == b'{"plain":true}', "seam 1 ThreadlessApiHandler"
    assert django_finished != [thread_name()], (
        "seam 1 ThreadlessApiHandler: Django's ASGIHandler.handle no longer closes an answer through sync_to_async"
    )
    assert our_finished == [thread_name()], "seam 1 ThreadlessApiHandler: handle_api no longer closes on the loop"


@pytest.mark.django_db(transaction=True)  # request_finished closes a thread's old connection, as in the worker
@pytest.mark.parametrize("handler_class", [ASGIHandler, seams.ThreadlessApiHandler])
async def test_a_client_gone_before_its_answer_cancels_the_view(handler_class, waiting_view):
    """Django cancels the view when `http.disconnect` arrives before the answer
    is sent, sends nothing and still sends request_finished; `handle_api`
    does the same in one task, and ends without raising."""
    gone = asyncio.Event()
    messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive():
        try:
            return next(messages)
        except StopIteration:
            await gone.wait()
            return {"type": "http.disconnect"}

    request_task = asyncio.create_task(answered(handler_class(), "/api/v1/waits", receive))
    await asyncio.wait_for(waiting_view["started"].wait(), 5)
    gone.set()
    sent, finished_on = await asyncio.wait_for(request_task, 5)
    assert waiting_view["cancelled"].is_set(), (
        f"seam 1 ThreadlessApiHandler: {handler_class.__name__} no longer cancels the view on http.disconnect"
    )
    assert sent == [] and len(finished_on) == 1, (
        f"seam 1 ThreadlessApiHandler: {handler_class.__name__} answers a gone client, or no longer sends request_finished once"
    )


async def test_a_cancel_from_outside_still_cancels_the_request(waiting_view):
    """A cancel that is not the client's disconnect (the server stopping) is
    not swallowed by `handle_api`."""
    request_task = asyncio.create_task(answered(seams.ThreadlessApiHandler(), "/api/v1/waits"))
    await asyncio.wait_for(waiting_view["started"].wait(), 5)
    request_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request_task
    assert waiting_view["cancelled"].is_set(), (
        "seam 1 ThreadlessApiHandler: the server's cancel no longer reaches the view"
    )


@pytest.mark.django_db(transaction=True)
async def test_a_disconnect_beside_a_cancel_from_outside_still_cancels(waiting_view):
    """The server's cancel (its stop) and the client's disconnect at once:
    `handle_api` swallows only the disconnect's, and the request ends
    cancelled."""
    gone = asyncio.Event()
    messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive():
        for message in messages:
            return message
        await gone.wait()
        return {"type": "http.disconnect"}

    request_task = asyncio.create_task(answered(seams.ThreadlessApiHandler(), "/api/v1/waits", receive))
    await asyncio.wait_for(waiting_view["started"].wait(), 5)
    gone.set()  # the watcher cancels the request when it next runs...
    request_task.cancel()  # ...and the server cancels it too
    with pytest.raises(asyncio.CancelledError):
        await request_task
    assert waiting_view["cancelled"].is_set(), "seam 1 ThreadlessApiHandler: a disconnect beside the server's cancel"


def request_then_nothing():
    """An ASGI `receive` for a GET whose client stays: the request, then nothing."""
    messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive():
        for message in messages:
            return message
        await asyncio.Event().wait()

    return receive


WAITS: dict[str, asyncio.Event] = {}


async def waits(request):
    WAITS["started"].set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        WAITS["cancelled"].set()
        raise


async def plain(request):
    return HttpResponse(b'{"plain":true}', content_type="application/json")


urlpatterns = [path("api/v1/waits", waits), path("api/v1/plain", plain)]


# --- 3. DRF's request stream -----------------------------------------------------------


def without_content_length(body: bytes):
    made = factory.post("/api/v1/main/x", data=body, content_type="application/json")
    del made.META["CONTENT_LENGTH"]  # as a chunked request arrives
    return made


def test_drf_reads_no_body_without_a_content_length_unless_the_stream_is_replaced():
    """DRF 3.18's `Request._load_stream` sets no stream when there is no
    Content-Length, so the parser is never called and the data is empty;
    `WholeBodyRequest` overrides that private method. If the first assert
    fails, DRF reads such bodies now: remove `WholeBodyRequest` (and
    `initialize_request` in `InlineDispatch`). If the second fails, DRF
    renamed or stopped calling `_load_stream`: find where it sets
    `_stream` now and override that instead."""
    body = b'{"a": 1}'
    assert Request(without_content_length(body), parsers=[JSONParser()]).data == {}, (
        "seam 3 WholeBodyRequest: DRF's Request now reads a body without a Content-Length (remove the seam)"
    )
    assert seams.WholeBodyRequest(without_content_length(body), parsers=[JsonObjectBody()]).data == {"a": 1}, (
        "seam 3 WholeBodyRequest: DRF's Request._load_stream renamed or no longer called"
    )


# --- 4. adrf's dispatch ------------------------------------------------------------------


def dispatching(base: type) -> tuple[type, dict[str, str]]:
    """A view on `base` that records the thread DRF's `initial()` ran on."""
    seen: dict[str, str] = {}

    class Probe(base):
        authentication_classes = ()
        permission_classes = ()

        def initial(self, request, *args, **kwargs):
            seen["initial"] = thread_name()
            super().initial(request, *args, **kwargs)

        async def get(self, request):
            return json_response({"success": True, "page_id": None})

    return Probe, seen


async def test_adrf_runs_initial_in_a_thread_and_finalizes_with_allow_our_dispatch_does_neither():
    """adrf 0.1.14's `APIView.async_dispatch` runs DRF's `initial()` through
    `sync_to_async` and ends with DRF's `finalize_response`, which sets
    `default_response_headers` (`Allow`) on every answer.
    `InlineDispatch.async_dispatch` replaces it. If the adrf half fails,
    adrf changed its dispatch: read the new `async_dispatch`; if it runs
    `initial()` inline and sets no headers, remove the override (keep
    `response_headers` and `initialize_request` some other way). If the
    other half fails, the override is no longer called (adrf renamed
    `async_dispatch`, or `dispatch` stopped calling it)."""
    theirs, their_seen = dispatching(AdrfView)
    answer = await theirs.as_view()(factory.get("/probe"))
    assert answer.status_code == 200, "seam 4 InlineDispatch: adrf's APIView no longer answers the probe"
    assert their_seen["initial"] != thread_name(), (
        "seam 4 InlineDispatch: adrf's APIView.async_dispatch now runs DRF's initial() on the loop"
    )
    assert answer["Allow"] == "GET, HEAD, OPTIONS", (
        "seam 4 InlineDispatch: adrf's dispatch no longer ends in DRF's finalize_response (Allow)"
    )

    ours, our_seen = dispatching(type("Inline", (seams.InlineDispatch, AdrfView), {}))
    answer = await ours.as_view()(factory.get("/probe"))
    assert answer.status_code == 200, "seam 4 InlineDispatch: the inline dispatch no longer answers"
    assert our_seen["initial"] == thread_name(), (
        "seam 4 InlineDispatch: no longer called (adrf renamed async_dispatch, or dispatch stopped calling it)"
    )
    assert "Allow" not in answer and "Vary" not in answer, "seam 4 InlineDispatch: DRF's default headers came back"


async def test_the_api_views_answer_with_their_headers_and_a_405_with_allow():
    """What `ApiView` asks of the dispatch: its `response_headers` on every
    answer, none of DRF's default ones, and a method it does not handle
    answered by the exception handler (405 with `Allow`)."""

    class Probe(ApiView):
        permission_classes = ()

        async def get(self, request):
            return json_response({"success": True, "page_id": None})

    view = Probe.as_view()
    answer = await view(factory.get("/probe"))
    assert answer.status_code == 200 and answer["X-Frame-Options"] == "DENY" and "Allow" not in answer, (
        "seam 4 InlineDispatch: an ApiView's answer lost its response_headers or gained DRF's"
    )
    refused = await view(factory.post("/probe"))
    assert refused.status_code == 405 and refused["Allow"] == "GET" and refused["X-Frame-Options"] == "DENY", (
        "seam 4 InlineDispatch: DRF's 405 no longer carries Allow through the envelope"
    )


# --- 5. Django's middleware outside its handler ------------------------------------------


def test_django_middleware_hooks_are_the_ones_the_chain_knows():
    """Django 5.2's `BaseHandler.load_middleware` collects three hooks besides
    the call: `process_view`, `process_template_response` and
    `process_exception`. `MiddlewareChain` forwards `process_view` only, which
    is enough while no admin middleware has the other two. If this fails,
    Django knows another hook, or an admin middleware grew one: forward it
    in `MiddlewareChain` (as Django's handler would run it)."""
    source = inspect.getsource(BaseHandler.load_middleware)
    assert set(re.findall(r'"(process_\w+)"', source)) == {
        "process_view",
        "process_template_response",
        "process_exception",
    }, "seam 5 MiddlewareChain: Django's BaseHandler.load_middleware collects other hooks now"
    for name in settings.ADMIN_MIDDLEWARE:
        middleware = import_string(name)
        assert not hasattr(middleware, "process_template_response"), f"seam 5 MiddlewareChain: {name} has one now"
        assert not hasattr(middleware, "process_exception"), f"seam 5 MiddlewareChain: {name} has one now"


async def test_the_admin_chain_runs_async_with_its_view_check():
    """Django 5.2's `MiddlewareMixin` runs async (`__acall__`) when what it
    wraps is a coroutine function, so a chain built without Django's
    `adapt_method_mode` stays async; and CSRF's `process_view` refuses a
    POST without a token. If this fails, the mixin decides its mode
    otherwise (adapt each layer as `BaseHandler.load_middleware` does), or
    CSRF's check moved out of `process_view` (forward it from there)."""

    async def view(request):
        refusal = await chain.process_view(request, view, (), {})
        return refusal or HttpResponse(b"admin page")

    chain = seams.MiddlewareChain(settings.ADMIN_MIDDLEWARE, view)
    assert iscoroutinefunction(chain.chain), (
        "seam 5 MiddlewareChain: Django's MiddlewareMixin no longer runs async around a coroutine function"
    )

    page = await chain(factory.get("/admin/"))
    assert page.status_code == 200 and page.content == b"admin page", (
        "seam 5 MiddlewareChain: what the seam makes of it changed"
    )
    assert page["X-Frame-Options"] == "DENY", (  # the clickjacking middleware ran
        "seam 5 MiddlewareChain: the admin's chain no longer runs Django's XFrameOptionsMiddleware"
    )

    refused = await chain(factory.post("/admin/login/", data={"username": "a"}))
    assert refused.status_code == 403 and b"CSRF" in refused.content, (
        "seam 5 MiddlewareChain: Django's CsrfViewMiddleware.process_view no longer refuses a POST without a token"
    )


# --- 6. daphne's request class -----------------------------------------------------------


class Connections:
    """What daphne's WebRequest tells its server: the requests it holds."""

    server_name = ""  # what daphne writes as `Server:` (none here)

    def __init__(self) -> None:
        self.requests: set = set()

    def protocol_connected(self, request) -> None:
        self.requests.add(request)

    def protocol_disconnected(self, request) -> None:
        self.requests.discard(request)


@pytest.fixture
def bounded(monkeypatch):
    """daphne building bounded requests for one test (its own class put back
    after), and the refusals they made."""
    from daphne import http_protocol
    from twisted.internet.task import Clock
    from twisted.web import http

    monkeypatch.setattr(http_protocol, "WebRequest", http_protocol.WebRequest)
    monkeypatch.setattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", 1000)
    refusals: list[tuple[str, str, str]] = []

    def refusal(method: str, path: str, what: str) -> bytes:
        refusals.append((method, path, what))
        return b"HTTP/1.1 413 Request Entity Too Large\r\n\r\n"

    request_class = seams.bound_request_bodies(refusal)
    # daphne's own factory, on a Twisted clock instead of the global reactor.
    server_factory = http_protocol.HTTPFactory.__new__(http_protocol.HTTPFactory)
    http.HTTPFactory.__init__(server_factory, reactor=Clock())
    server_factory.server = Connections()
    return server_factory, request_class, refusals


def connection(server_factory):
    from twisted.internet.testing import StringTransport

    protocol = server_factory.buildProtocol(None)
    transport = StringTransport()
    protocol.makeConnection(transport)
    return protocol, transport


def test_daphne_builds_each_request_from_its_module_attribute_and_twisted_calls_the_hooks(bounded):
    """daphne 4.2's `HTTPFactory.buildProtocol` looks `WebRequest` up in
    `daphne.http_protocol` for each connection, and Twisted 26's HTTPChannel
    calls the request's `gotLength(length)` once the headers are in (with the
    request line in the channel's `_command` and `_path`) and
    `handleContentChunk(data)` for each piece of the body. If this fails,
    daphne takes its request class from elsewhere, or Twisted renamed a hook
    or the channel's fields: adapt `bound_request_bodies` to the new names
    (tests/test_bounds.py then checks it on a real worker)."""
    server_factory, request_class, refusals = bounded
    protocol, transport = connection(server_factory)
    assert protocol.requestFactory is request_class, (
        "seam 6 bound_request_bodies: daphne.http_protocol.WebRequest no longer looked up per connection"
    )

    protocol.dataReceived(b"POST /api/v1/main/x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n")
    assert refusals == [("POST", "/api/v1/main/x", "declared 1001 bytes")], (
        "seam 6 bound_request_bodies: Twisted's HTTPChannel no longer calls Request.gotLength after the head, "
        "with the request line in _command and _path"
    )
    assert transport.value() == b"HTTP/1.1 413 Request Entity Too Large\r\n\r\n" and transport.disconnecting, (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )

    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"PUT /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
    protocol.dataReceived(b"3e8\r\n" + b"x" * 1000 + b"\r\n")
    assert transport.value() == b"" and len(refusals) == 1, (  # 1000 bytes: within the bound
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )
    protocol.dataReceived(b"1\r\nx\r\n")
    assert refusals[1] == ("PUT", "/p", "more than 1000 bytes received") and transport.disconnecting, (
        "seam 6 bound_request_bodies: Twisted's HTTPChannel no longer calls Request.handleContentChunk per piece"
    )


def test_a_body_within_the_bound_is_read_on(bounded):
    server_factory, _request_class, refusals = bounded
    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n" + b"x" * 999)
    assert refusals == [] and transport.value() == b"" and not transport.disconnecting, (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )


class Application(Connections):
    """Connections that also run daphne's `process`: the scope and the queue
    of body messages daphne gives the application."""

    request_buffer_size = 8192
    proxy_forwarded_address_header = None
    root_path = ""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[dict] = []
        self.queues: list[queue.SimpleQueue] = []

    def create_application(self, protocol, scope: dict) -> queue.SimpleQueue:
        self.scopes.append(scope)
        self.queues.append(queue.SimpleQueue())
        return self.queues[-1]


LATER = b"HTTP/1.1 401 Later\r\n\r\n"
LATER_S = 2.0


class Sinks(list):
    later: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.later = []


class Sink:
    def __init__(self, limit: int) -> None:
        self.limit, self.received, self.ended = limit, b"", None

    def write(self, data: bytes) -> None:
        self.received += data

    def finish(self) -> str:
        self.ended = "finished"
        return f"{len(self.received)} bytes"

    def too_large(self) -> bytes:
        return b"HTTP/1.1 413 Too Large\r\n\r\n"

    def abort(self) -> None:
        self.ended = "aborted"


@pytest.fixture
def streaming(monkeypatch):
    """`bound_request_bodies` with a stream choice: /up goes to a Sink of 100
    bytes; with `Authorization: later`, it is answered LATER_S on (the
    factory's clock), each answered request's address in `sinks.later`."""
    from daphne import http_protocol
    from twisted.internet.task import Clock
    from twisted.web import http

    monkeypatch.setattr(http_protocol, "WebRequest", http_protocol.WebRequest)
    sinks = Sinks()

    def choose(method: str, path: str, headers: dict[str, str], length: int | None, address: str):
        if path != "/up":
            return None
        if headers.get("authorization") == "later":
            return seams.AnswerLater(LATER, LATER_S, lambda: sinks.later.append(address))
        if headers.get("authorization") != "yes":
            return b"HTTP/1.1 401 Unauthorized\r\n\r\n"
        sinks.append(Sink(100))
        return sinks[-1]

    seams.bound_request_bodies(lambda *_: b"HTTP/1.1 413 Refused\r\n\r\n", {"/up": choose})
    server_factory = http_protocol.HTTPFactory.__new__(http_protocol.HTTPFactory)
    http.HTTPFactory.__init__(server_factory, reactor=Clock())
    server_factory.server = Application()
    return server_factory, sinks


def test_daphne_queues_the_whole_body_for_the_application_at_once(streaming):
    """daphne 4.2's `process` reads the request's whole buffered body and puts
    it in the application's queue in `request_buffer_size` pieces before the
    application reads any: a streamed body (an upload) must not reach it that
    way. If this fails, daphne streams bodies itself; the sink may then be
    simpler (tests/test_uploads.py checks uploads on a real worker)."""
    server_factory, sinks = streaming
    protocol, _transport = connection(server_factory)
    protocol.dataReceived(b"POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 20000\r\n\r\n" + b"x" * 20000)
    body = server_factory.server.queues[0]
    pieces = [body.get_nowait() for _ in range(body.qsize())]
    assert [len(piece["body"]) for piece in pieces] == [8192, 8192, 3616] and sinks == [], (
        "seam 6 bound_request_bodies: daphne's WebRequest.process no longer queues the whole body at once "
        "in request_buffer_size pieces (it may stream now: the sink may be simpler)"
    )


def test_a_streamed_body_goes_to_its_sink_and_daphne_gets_none(streaming):
    from twisted.internet.error import ConnectionDone  # as the fixtures import Twisted: after the reactor

    server_factory, sinks = streaming
    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /up HTTP/1.1\r\nHost: a\r\nAuthorization: yes\r\nPenelope-Streamed: forged\r\n")
    protocol.dataReceived(b"Content-Length: 60\r\n\r\n" + b"y" * 60)
    assert sinks[0].received == b"y" * 60 and sinks[0].ended == "finished", (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )
    scope = server_factory.server.scopes[0]
    assert [value for name, value in scope["headers"] if name == b"penelope-streamed"] == [b"60 bytes"], (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )
    assert server_factory.server.queues[0].get_nowait()["body"] == b"", (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )

    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 60\r\n\r\n")
    assert transport.value() == b"HTTP/1.1 401 Unauthorized\r\n\r\n" and transport.disconnecting, (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )

    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /up HTTP/1.1\r\nHost: a\r\nAuthorization: yes\r\nTransfer-Encoding: chunked\r\n\r\n")
    protocol.dataReceived(b"50\r\n" + b"z" * 80 + b"\r\n")
    protocol.dataReceived(b"50\r\n" + b"z" * 80 + b"\r\n")
    assert sinks[1].ended == "aborted" and transport.value() == b"HTTP/1.1 413 Too Large\r\n\r\n", (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )

    protocol, transport = connection(server_factory)
    protocol.dataReceived(
        b"POST /up HTTP/1.1\r\nHost: a\r\nAuthorization: yes\r\nContent-Length: 60\r\n\r\n" + b"w" * 30
    )
    protocol.connectionLost(ConnectionDone())
    assert sinks[2].ended == "aborted" and len(server_factory.server.scopes) == 1, (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )


def test_an_answer_later_drops_the_body_and_the_request_never_reaches_daphne(streaming):
    """An AnswerLater (an upload's wrong key, media_store/uploads.py) is
    written when due, on the channel's clock, and closes; its body is read
    and dropped meanwhile, and daphne never gets the request, whole as it
    is. A client gone before it cancels it; `done` runs either way. Nor
    does an answer given at once reach daphne when the whole request came
    with its head."""
    from twisted.internet.error import ConnectionDone  # as the fixtures import Twisted: after the reactor

    server_factory, sinks = streaming
    clock = server_factory.reactor
    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /up HTTP/1.1\r\nHost: a\r\nAuthorization: later\r\nContent-Length: 5\r\n\r\nhello")
    clock.advance(LATER_S - 0.1)
    assert transport.value() == b"" and not transport.disconnecting and sinks.later == [], (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )
    clock.advance(0.1)
    assert transport.value() == LATER and transport.disconnecting, (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )
    assert sinks.later == [transport.getPeer().host] and sinks == [] and server_factory.server.scopes == [], (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )
    protocol.connectionLost(ConnectionDone())
    assert sinks.later == [transport.getPeer().host], (  # done once
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )

    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /up HTTP/1.1\r\nHost: a\r\nAuthorization: later\r\nContent-Length: 50\r\n\r\nab")
    protocol.connectionLost(ConnectionDone())
    assert len(sinks.later) == 2, "seam 6 bound_request_bodies: what the seam makes of it changed"
    clock.advance(LATER_S)
    assert transport.value() == b"" and len(sinks.later) == 2 and server_factory.server.scopes == [], (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )

    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
    assert transport.value() == b"HTTP/1.1 401 Unauthorized\r\n\r\n" and server_factory.server.scopes == [], (
        "seam 6 bound_request_bodies: what the seam makes of it changed"
    )


# --- 7. Twisted's HTTP channel, under daphne's factory ----------------------------------

HEAD_LIMIT = 16384


@pytest.fixture
def daphne_factory(monkeypatch):
    """daphne's own factory on a Twisted clock, its protocol put back after the test."""
    from daphne import http_protocol
    from twisted.internet.task import Clock
    from twisted.web import http

    monkeypatch.setattr(http_protocol.HTTPFactory, "protocol", http_protocol.HTTPFactory.protocol)
    server_factory = http_protocol.HTTPFactory.__new__(http_protocol.HTTPFactory)
    http.HTTPFactory.__init__(server_factory, reactor=Clock())
    server_factory.server = Connections()
    return server_factory


def heads(target_length: int, header_count: int = 0) -> dict[str, bytes]:
    """Request heads as Twisted counts them (lines without their CRLFs): one
    at the bound, one a byte past it in many short headers, one whose request
    line alone passes it."""
    line = b"POST /api/v1/main/x?q=%s HTTP/1.1"
    at = line % (b"a" * (HEAD_LIMIT - len(line % b"") - len(b"Content-Length: 5")))
    assert len(at) + len(b"Content-Length: 5") == HEAD_LIMIT, (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    many = [b"X-H%03d: %s" % (n, b"b" * 92) for n in range(170)]  # 100 bytes each, 17,000 together
    return {
        "at the bound": at + b"\r\nContent-Length: 5\r\n\r\n",
        "many headers past it": b"GET /api/v1/main/x HTTP/1.1\r\n" + b"\r\n".join(many) + b"\r\n\r\n",
        "a long line": b"GET /api/v1/main/x?q=" + b"c" * HEAD_LIMIT + b" HTTP/1.1\r\nHost: a\r\n\r\n",
    }


def test_twisted_bounds_the_head_with_a_bare_400_or_a_silent_close_and_the_seam_answers_instead(daphne_factory):
    """Twisted 26's `HTTPChannel` (under daphne 4.2's `HTTPFactory`, which
    builds its protocol through Twisted's `HTTPFactory.buildProtocol` and the
    factory's `protocol`) counts the request line and headers, without their
    line ends, against `totalHeadersSize` (16384) in `lineReceived` and
    answers a bare 400 past it; `LineReceiver` calls `lineLengthExceeded`
    for a line past `MAX_LENGTH` (16384), which closes the connection with no
    answer. `bound_request_heads` makes both checks first in its channel, at
    the same figure. If this fails, Twisted moved the checks or changed the
    count: read the new `HTTPChannel.lineReceived` and
    `LineReceiver.dataReceived`, and adapt `BoundedChannel` (and
    docs/reference/API.md if the figure moves); if daphne builds its protocol
    another way, hook the channel in there."""
    from twisted.web import http

    assert http.HTTPChannel.totalHeadersSize == HEAD_LIMIT and http.HTTPChannel.MAX_LENGTH == HEAD_LIMIT, (
        "seam 7 bound_request_heads: Twisted's HTTPChannel.totalHeadersSize or MAX_LENGTH moved from 16384"
    )
    sent = heads(HEAD_LIMIT)

    def upstream(head: bytes) -> tuple[bytes, bool]:
        protocol, transport = connection(daphne_factory)
        assert type(protocol._channel) is http.HTTPChannel, (
            "seam 7 bound_request_heads: daphne's HTTPFactory no longer wraps Twisted's HTTPChannel"
        )
        protocol.dataReceived(head)
        return transport.value(), bool(transport.disconnecting)

    assert upstream(sent["at the bound"]) == (b"", False), (  # waits for its body
        "seam 7 bound_request_heads: Twisted's HTTPChannel counts the head otherwise (a head at the bound refused)"
    )
    assert upstream(sent["many headers past it"]) == (b"HTTP/1.1 400 Bad Request\r\n\r\n", True), (
        "seam 7 bound_request_heads: Twisted's HTTPChannel.lineReceived no longer answers a bare 400 past totalHeadersSize"
    )
    assert upstream(sent["a long line"]) == (b"", True), (
        "seam 7 bound_request_heads: Twisted's LineReceiver.lineLengthExceeded no longer closes without a word"
    )

    refusals: list[tuple[str, str]] = []

    def refusal(method: str, path: str) -> bytes:
        refusals.append((method, path))
        return b"HTTP/1.1 414 URI Too Long\r\n\r\n"

    channel_class = seams.bound_request_heads(HEAD_LIMIT, refusal)

    def ours(head: bytes) -> tuple[bytes, bool]:
        protocol, transport = connection(daphne_factory)
        assert type(protocol._channel) is channel_class, (
            "seam 7 bound_request_heads: daphne's HTTPFactory.protocol no longer builds the channel the seam set"
        )
        protocol.dataReceived(head)
        return transport.value(), bool(transport.disconnecting)

    assert ours(sent["at the bound"]) == (b"", False), "seam 7 bound_request_heads: what the seam makes of it changed"
    assert ours(sent["many headers past it"]) == (b"HTTP/1.1 414 URI Too Long\r\n\r\n", True), (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    assert ours(sent["a long line"]) == (b"HTTP/1.1 414 URI Too Long\r\n\r\n", True), (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    assert refusals == [("GET", "/api/v1/main/x"), ("GET", "/api/v1/main/x")], (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )


def test_twisted_refuses_more_than_500_headers_with_a_bare_400_and_the_seam_answers_instead(daphne_factory):
    """Twisted 26's `HTTPChannel.headerReceived` counts each header once it is
    stored (`_receivedHeaderCount`) and answers a bare 400 for the one past
    `maxHeaders` (500). `bound_request_heads` checks the count first in its
    `headerReceived` and writes `too_many(method, path)`, the envelope
    (core/bounded_http.py says 500: `MAX_HEADERS`). If this fails, Twisted
    moved the count or changed the figure: adapt `BoundedChannel` and
    `MAX_HEADERS` (docs/reference/API.md states it)."""
    from twisted.web import http

    from core.bounded_http import MAX_HEADERS

    assert http.HTTPChannel.maxHeaders == MAX_HEADERS == 500, (
        "seam 7 bound_request_heads: Twisted's HTTPChannel.maxHeaders moved from 500"
    )

    def request(count: int) -> bytes:
        # Host is one of them.
        return (
            b"GET /api/v1/main/x?y=1 HTTP/1.1\r\nHost: a\r\n"
            + b"".join(b"X-H%d: v\r\n" % n for n in range(count - 1))
            + b"\r\n"
        )

    def answer(count: int) -> tuple[bytes, bool]:
        protocol, transport = connection(daphne_factory)
        protocol.dataReceived(request(count))
        return transport.value(), bool(transport.disconnecting)

    assert answer(501) == (b"HTTP/1.1 400 Bad Request\r\n\r\n", True), (  # Twisted's own
        "seam 7 bound_request_heads: Twisted's HTTPChannel.headerReceived no longer answers a bare 400 past maxHeaders"
    )
    refusals: list[tuple[str, str]] = []

    def too_many(method: str, path: str) -> bytes:
        refusals.append((method, path))
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}"

    seams.bound_request_heads(HEAD_LIMIT, lambda method, path: b"", too_many)
    assert answer(500)[1] is False and refusals == [], (  # 500 are taken: the request is served
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    assert answer(501) == (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}", True), (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    assert refusals == [("GET", "/api/v1/main/x")], "seam 7 bound_request_heads: what the seam makes of it changed"


def test_twisted_answers_a_malformed_request_with_a_bare_400_and_the_seam_answers_instead(daphne_factory):
    """Twisted 26's `HTTPChannel` answers every request it finds malformed
    (a request line that `_parseRequestLine` refuses: a raw 0xFF or NUL byte
    in its target; a header line without a colon, or with NUL in its value)
    with `_respondToBadRequestAndDisconnect`, a bare `400` with no body.
    `bound_request_heads`, given `malformed`, overrides that one method and
    writes `malformed(method, path)`: the request line as far as it was
    read, the channel's own once it parsed one. If this fails, Twisted
    renamed the method or answers these another way: read the new
    `HTTPChannel.lineReceived` and `headerReceived`, and adapt
    `BoundedChannel` (core/bounded_http.py says what is answered)."""
    bad_line = b"GET /api/v1/main/x\xff HTTP/1.1\r\nHost: a\r\n\r\n"
    bad_header = b"GET /api/v1/main/y HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n"

    def answer(head: bytes) -> tuple[bytes, bool]:
        protocol, transport = connection(daphne_factory)
        protocol.dataReceived(head)
        return transport.value(), bool(transport.disconnecting)

    assert answer(bad_line) == (b"HTTP/1.1 400 Bad Request\r\n\r\n", True), (  # Twisted's own
        "seam 7 bound_request_heads: Twisted no longer answers a malformed request line with "
        "_respondToBadRequestAndDisconnect's bare 400"
    )
    assert answer(bad_header) == (b"HTTP/1.1 400 Bad Request\r\n\r\n", True), (
        "seam 7 bound_request_heads: Twisted no longer answers a malformed header with "
        "_respondToBadRequestAndDisconnect's bare 400"
    )
    refusals: list[tuple[str, str]] = []

    def malformed(method: str, path: str) -> bytes:
        refusals.append((method, path))
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}"

    seams.bound_request_heads(HEAD_LIMIT, lambda method, path: b"", None, malformed)
    assert answer(bad_line) == (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}", True), (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    assert answer(bad_header) == (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}", True), (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )
    assert refusals == [("GET", "/api/v1/main/x\xff"), ("GET", "/api/v1/main/y")], (
        "seam 7 bound_request_heads: what the seam makes of it changed"
    )


def test_twisted_keeps_the_request_line_and_the_head_s_size_where_the_seams_read_them(daphne_factory):
    """The private names of Twisted 26's HTTP server that pieces 6 and 7
    read or build: the channel keeps the request line in `_command` and
    `_path`, the bytes of the head so far (lines without their ends) in
    `_receivedHeaderSize`, the headers stored so far in
    `_receivedHeaderCount`, and daphne's factory wraps it in
    `_GenericHTTPChannelProtocol`. If this fails, Twisted renamed one: read
    the new `HTTPChannel.lineReceived` and `headerReceived`, and rename it
    in core/seams/server.py."""
    from twisted.web import http

    protocol, _transport = connection(daphne_factory)
    assert type(protocol) is http._GenericHTTPChannelProtocol, (
        "seams 6 and 7: Twisted's HTTPFactory no longer builds a _GenericHTTPChannelProtocol"
    )
    lines = [b"POST /api/v1/main/x?y=1 HTTP/1.1", b"Host: a", b"X-A: b"]
    protocol.dataReceived(b"".join(line + b"\r\n" for line in lines))  # the last header waits for a continuation
    channel = protocol._channel
    assert (channel._command, channel._path) == (b"POST", b"/api/v1/main/x?y=1"), (
        "seams 6 and 7: Twisted's HTTPChannel no longer keeps the request line in _command and _path"
    )
    assert channel._receivedHeaderSize == sum(len(line) for line in lines), (
        "seam 7 bound_request_heads: Twisted's HTTPChannel._receivedHeaderSize renamed or counted otherwise"
    )
    assert channel._receivedHeaderCount == 1, (
        "seam 7 bound_request_heads: Twisted's HTTPChannel._receivedHeaderCount renamed or counted otherwise"
    )


# --- relied on: Django's connections belong to a thread ----------------------------------


def test_a_django_connection_belongs_to_its_thread_not_to_the_caller_context():
    """core/db_thread.py keeps one SQLite connection open on its thread for
    the process's life, calling in with each caller's copied context: it
    relies on Django 5.2's `connections` being per thread
    (`ConnectionHandler.thread_critical`), not per asyncio context. If this
    fails, each call would open a connection again (the cost
    docs/BENCHMARKS.md found in two thirds of a poll's database time): keep
    the connection some other way, e.g. set the context once on the thread."""
    with ThreadPoolExecutor(max_workers=1) as one, ThreadPoolExecutor(max_workers=1) as other:
        first = one.submit(contextvars.copy_context().run, lambda: connections["default"]).result()
        again = one.submit(contextvars.copy_context().run, lambda: connections["default"]).result()
        elsewhere = other.submit(lambda: connections["default"]).result()
    assert first is again, "relied on (core/db_thread.py): Django's connections no longer belong to a thread"
    assert first is not elsewhere, "relied on (core/db_thread.py): Django's connections no longer belong to a thread"


# --- 8. the ORM's INSERT ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_insert_row_writes_the_row_save_writes():
    """`insert_row` writes, for every column of a job, what
    `save(force_insert=True)` writes (Django's compiler and the fields'
    preparation), and leaves the instance as `save()` does. If this fails,
    Django prepares or writes an INSERT otherwise: read `Model._do_insert`
    and `SQLInsertCompiler` of the new version and match them, or give
    `Job.start` back to `objects.create()`."""
    from jobs.models import Job

    shape = {
        "page_id": "main",
        "plugin": "demo/echo",
        "params": {"a": [1, "é"]},
        "mode": "poll",
        "accepted_at": 1.5,
        "started_at": 1.5,
        "result": {"value": None},
        "callback": None,
    }
    ours, django = Job(id="00000000000000aa", **shape), Job(id="00000000000000ab", **shape)
    seams.insert_row(ours)
    django.save(force_insert=True)
    with connections["default"].cursor() as cursor:
        rows = cursor.execute(
            "SELECT * FROM jobs_job WHERE id IN (%s, %s) ORDER BY id", [ours.id, django.id]
        ).fetchall()
    assert rows[0][1:] == rows[1][1:] and rows[0][0] != rows[1][0], (  # every column alike but the id
        "seam 8 insert_row: Django's save(force_insert=True) writes another row now (SQLInsertCompiler, pre_save, "
        "get_db_prep_save)"
    )
    assert ours._state.adding is False and ours._state.db == "default", (
        "seam 8 insert_row: Model._state is no longer left as save() leaves it"
    )
    stored = Job.objects.get(id=ours.id)
    assert (stored.params, stored.state, stored.priority) == ({"a": [1, "é"]}, "running", 0), (
        "seam 8 insert_row: what the seam makes of it changed"
    )


# --- 9. a response's close ------------------------------------------------------------------


def test_django_runs_a_response_s_closers_once_when_it_closes_it():
    """Django 5.2's `HttpResponseBase.close` calls each of the response's
    `_resource_closers` in order (an error in one is swallowed), then
    empties the list; `FileResponse` closes its file so. `close_with` adds
    to that list. If this fails, Django closes a response otherwise: read
    the new `HttpResponseBase.close`, and find where a callback can run at
    the close (activity/middleware.py and media_store/views.py need one)."""
    with open(__file__, "rb") as handle:
        assert handle.close in FileResponse(handle)._resource_closers, (
            "seam 9 close_with: Django's HttpResponseBase no longer keeps _resource_closers (FileResponse's file)"
        )

    ran: list[str] = []
    response = StreamingHttpResponse(iter([b"never sent"]))
    seams.close_with(response, lambda: ran.append("first"))
    seams.close_with(response, lambda: 1 / 0)
    seams.close_with(response, lambda: ran.append("last"))
    assert ran == [], "seam 9 close_with: what the seam makes of it changed"
    response.close()
    assert ran == ["first", "last"], (
        "seam 9 close_with: Django's HttpResponseBase.close no longer runs each of _resource_closers, "
        "swallowing their errors"
    )
    response.close()
    assert ran == ["first", "last"], "seam 9 close_with: Django's HttpResponseBase.close runs the closers twice"


# --- 10. the Django request under DRF's -----------------------------------------------------


def test_drf_keeps_the_django_request_it_wraps_and_keeps_what_is_set_on_it_for_itself():
    """DRF 3.18's `Request.__init__` keeps the Django request in `_request`;
    a read of a name DRF's request lacks is passed on to it, but a value set
    on DRF's request stays there. So core/auth.py caches a key's role on the
    Django request, which the request log's middleware also holds, through
    `django_request_of`. If this fails, DRF renamed `_request`: read the new
    `Request.__init__` and follow it."""
    django_request = factory.get("/api/v1/main")
    request = seams.WholeBodyRequest(django_request)
    assert seams.django_request_of(request) is django_request, (
        "seam 10 django_request_of: DRF's Request.__init__ no longer keeps the Django request in _request"
    )
    assert seams.django_request_of(Request(django_request)) is django_request, (
        "seam 10 django_request_of: DRF's Request.__init__ no longer keeps the Django request in _request"
    )

    django_request.set_below = "seen"
    assert request.set_below == "seen", "seam 10 django_request_of: DRF's Request no longer passes reads on"
    request.set_above = "kept"
    assert not hasattr(django_request, "set_above"), (
        "seam 10 django_request_of: DRF's Request now passes what is set on it to the Django request"
    )


# --- 11. the reactor's asyncio loop ---------------------------------------------------------


def test_twisted_s_asyncio_reactor_runs_on_the_loop_it_was_given():
    """Twisted 26's `AsyncioSelectorReactor(eventloop)` keeps the loop in
    `_asyncioEventloop` and runs its calls on it (daphne 4.2 installs it
    with a loop of its own). `asyncio_loop_of` reads it. If this fails,
    Twisted renamed it: read the new `AsyncioSelectorReactor.__init__`, or
    take the loop from daphne (`daphne.server.twisted_loop`)."""
    from twisted.internet.asyncioreactor import AsyncioSelectorReactor

    loop = asyncio.new_event_loop()
    try:
        reactor = AsyncioSelectorReactor(loop)
        assert seams.asyncio_loop_of(reactor) is loop, (
            "seam 11 asyncio_loop_of: Twisted's AsyncioSelectorReactor no longer keeps its loop in _asyncioEventloop"
        )
        ran_on: list[asyncio.AbstractEventLoop] = []

        def once_running() -> None:
            ran_on.append(asyncio.get_running_loop())
            reactor.stop()

        reactor.callLater(0, once_running)
        reactor.run(installSignalHandlers=False)
        assert ran_on == [loop], "seam 11 asyncio_loop_of: Twisted's AsyncioSelectorReactor runs on another loop"
    finally:
        loop.close()


# --- 12. the SQLite connection under Django's -----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_django_s_sqlite_wrapper_holds_the_connection_its_cursors_run_on():
    """Django 5.2's SQLite `DatabaseWrapper` keeps, once connected, the
    `sqlite3.Connection` its cursors run on in `connection`;
    `run_sqlite_script` runs `executescript` there, inside the wrapper's
    `wrap_database_errors`. If this fails, Django holds its connection
    elsewhere: read the new `BaseDatabaseWrapper.connect`, and follow it."""
    connection = connections["default"]
    seams.run_sqlite_script(
        connection, "CREATE TEMP TABLE probe (n); INSERT INTO probe VALUES (1); INSERT INTO probe VALUES (2);"
    )
    assert isinstance(connection.connection, sqlite3.Connection), (
        "seam 12 run_sqlite_script: Django's SQLite DatabaseWrapper no longer holds its sqlite3.Connection in connection"
    )
    with connection.cursor() as cursor:  # a TEMP table is seen by its own connection only
        assert cursor.execute("SELECT count(*) FROM probe").fetchone()[0] == 2, (
            "seam 12 run_sqlite_script: Django's cursors no longer run on the wrapper's connection"
        )
    with pytest.raises(OperationalError):  # Django's, not sqlite3's
        seams.run_sqlite_script(connection, "SELECT * FROM no_such_table;")


def test_a_cursor_steps_an_incremental_vacuum_once_and_a_script_to_its_end(tmp_path):
    """Why `run_sqlite_script` is needed: Python's sqlite3 steps a PRAGMA
    once on `execute`, and each step of `incremental_vacuum(N)` frees one
    page; `executescript` steps it to its end. If the first half fails,
    `execute` frees them all now: core/db_thread.py may use a cursor."""
    store = sqlite3.connect(tmp_path / "store.sqlite3", isolation_level=None)
    store.executescript(
        "PRAGMA auto_vacuum=INCREMENTAL; VACUUM; CREATE TABLE t (b); "
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20) INSERT INTO t SELECT zeroblob(4000) FROM n;"
    )

    def free() -> int:
        return store.execute("PRAGMA freelist_count").fetchone()[0]

    store.execute("DELETE FROM t")
    before = free()
    assert before >= 20, "seam 12 run_sqlite_script: the probe freed too few pages"
    store.execute("PRAGMA incremental_vacuum(10)")
    assert free() == before - 1, (
        "seam 12 run_sqlite_script: sqlite3's execute now steps an incremental_vacuum to its end (a cursor would do)"
    )
    store.executescript("PRAGMA incremental_vacuum(10);")
    assert free() == before - 11, "seam 12 run_sqlite_script: sqlite3's executescript no longer steps to the end"
    store.close()


# --- 13. one instance made another ----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_django_keeps_a_model_instance_s_state_in_its_dict():
    """Django 5.2 keeps a loaded instance's state in its `__dict__`: each
    concrete field's value under its `attname`, and `_state` (whether it is
    stored, and where); `take_saved_row` copies it, as schedules/admin.py
    needs. If this fails, Django keeps some of it elsewhere (a slot, a
    descriptor's own store): copy that too, or have the admin read the saved
    row another way."""
    from jobs.models import Job

    Job(
        id="00000000000000ac",
        page_id="main",
        plugin="demo/echo",
        params={"a": 1},
        mode="poll",
        accepted_at=1.5,
        started_at=1.5,
    ).save(force_insert=True)
    saved = Job.objects.get(id="00000000000000ac")
    assert set(vars(saved)) == {"_state", *(field.attname for field in Job._meta.concrete_fields)}, (
        "seam 13 take_saved_row: Django's Model keeps an instance's state outside its __dict__ now"
    )

    blank = Job()
    seams.take_saved_row(blank, saved)
    assert (blank.pk, blank.params, blank.started_at) == ("00000000000000ac", {"a": 1}, 1.5), (
        "seam 13 take_saved_row: the copied __dict__ no longer carries the field values"
    )
    assert blank._state.adding is False and blank._state.db == "default", (
        "seam 13 take_saved_row: the copied __dict__ no longer carries _state"
    )


# --- 14. the reason phrase of each status -----------------------------------------------------


def status_line_of(server_factory, status: int) -> bytes:
    """The status line daphne writes for `status`, for a request whose body
    is still coming (so the test's server need not run an application)."""
    protocol, transport = connection(server_factory)
    protocol.dataReceived(b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab")
    (request,) = [request for request in server_factory.server.requests if request.channel is protocol._channel]
    request.handle_reply({"type": "http.response.start", "status": status, "headers": []})
    request.handle_reply({"type": "http.response.body", "body": b"", "more_body": True})
    line = transport.value().split(b"\r\n", 1)[0]  # "(no clientproto yet) 429 ...": the request line is not all in
    return re.search(rb"\d{3} .*", line).group()


def test_daphne_sets_the_status_alone_and_the_seam_names_it(daphne_factory, monkeypatch):
    """daphne 4.2's `handle_reply` calls Twisted's `setResponseCode` with the
    status alone, and Twisted 26 writes the phrase of its `RESPONSES` table
    (`Unknown Status` for a 429) on the status line; `name_statuses` makes
    the request class pass the standard phrase instead. If the first half
    fails, Twisted names the status itself now (remove the seam, if its
    phrases are the standard ones) or daphne sets it another way (adapt
    `name_statuses`)."""
    from daphne import http_protocol

    from core.serving import reason_phrase

    monkeypatch.setattr(http_protocol, "WebRequest", http_protocol.WebRequest)
    assert status_line_of(daphne_factory, 429) == b"429 Unknown Status", (
        "seam 14 name_statuses: daphne's handle_reply or Twisted's RESPONSES names a 429 itself now (remove the seam?)"
    )
    assert status_line_of(daphne_factory, 408) == b"408 Request Time-out", (
        "seam 14 name_statuses: Twisted's RESPONSES names a 408 otherwise now"
    )

    request_class = seams.name_statuses(reason_phrase)
    assert http_protocol.WebRequest is request_class, (
        "seam 14 name_statuses: daphne.http_protocol.WebRequest no longer looked up per connection"
    )
    assert status_line_of(daphne_factory, 429) == b"429 Too Many Requests", (
        "seam 14 name_statuses: what the seam makes of it changed"
    )
    assert status_line_of(daphne_factory, 423) == b"423 Locked", (
        "seam 14 name_statuses: what the seam makes of it changed"
    )
    assert status_line_of(daphne_factory, 408) == b"408 Request Timeout", (
        "seam 14 name_statuses: what the seam makes of it changed"
    )
    assert status_line_of(daphne_factory, 499) == b"499 Client Closed Request", (
        "seam 14 name_statuses: what the seam makes of it changed"
    )
    assert status_line_of(daphne_factory, 200) == b"200 OK", "seam 14 name_statuses: what the seam makes of it changed"
    assert status_line_of(daphne_factory, 460) == b"460 Unknown Status", (  # no standard phrase: Twisted's
        "seam 14 name_statuses: what the seam makes of it changed"
    )


# --- 15. the file a running download is written to ---------------------------------------


def test_playwrights_download_knows_its_file_from_the_start_and_chromium_grows_it_beside(person, site):
    """Playwright 1.65's artifact carries `absolutePath` from the download's
    start (its public `path()` waits for the end), and Chromium writes
    `<that path>.crdownload` as the download runs, renamed at its end. If
    this fails, Playwright moved the path or Chromium its partial file:
    adapt `download_file_of` and plugins/downloads.py's `size_of`
    (tests/test_downloads.py then checks the bound on a real worker)."""
    context = person.new_context(accept_downloads=True)
    try:
        page = context.new_page()
        page.set_content(f"<a href='{site.url}/download?name=s.bin&kib=4096&pause_ms=20'>get</a>")
        with page.expect_download() as started:
            page.click("a")
        download = started.value
        try:
            known = seams.download_file_of(download)
        except (AttributeError, KeyError) as gone:
            raise AssertionError(
                "seam 15 download_file_of: Playwright's Download no longer has _impl_obj._artifact._initializer['absolutePath']"
            ) from gone
        growing = known.with_name(known.name + ".crdownload")
        wait_until(lambda: growing.exists() and growing.stat().st_size > 0, what="the partial file to grow")
        assert download.path() == known and not growing.exists(), (
            "seam 15 download_file_of: Playwright's artifact _initializer['absolutePath'] is not the download's file, "
            "or Chromium no longer writes <path>.crdownload beside it"
        )
        assert known.stat().st_size == 4096 * 1024, "seam 15 download_file_of: the download's file is not whole"
    finally:
        context.close()


# --- every assertion names its seam -----------------------------------------------------------


def test_every_assertion_here_names_its_seam():
    """A failure in these tests says which seam broke and, where it checks
    upstream, what upstream changed: every `assert` in this module and in
    tests/test_seams_sockets.py carries a message naming its seam (or what
    is relied on)."""
    unnamed = []
    for module in (Path(__file__), Path(__file__).with_name("test_seams_sockets.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Assert):
                message = (
                    node.msg.value if isinstance(node.msg, ast.Constant) else ast.unparse(node.msg or ast.Constant(""))
                )
                if not re.search(r"seams? \d+|relied on", message):
                    unnamed.append(f"{module.name}:{node.lineno}")
    assert not unnamed, f"seams 1 to 19: assertions without a seam named in their message: {unnamed}"
