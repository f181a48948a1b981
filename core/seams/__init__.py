"""Where the project reaches into its frameworks: every override of a Django,
DRF, adrf, daphne or Twisted internal, and every use of a private name of
theirs (or of Playwright's or channels'), and nothing else.

Pieces 1 to 8, 14, 16 and 18 replace upstream code for a gain that was
measured (or, for four of them, a behaviour the contract needs); pieces 9
to 13, 15, 17 and 19 only use a private name, for what no public one gives. Each is an upgrade hazard: a new
upstream version can change what it relies on without a word.
`tests/test_seams.py` (pieces 16 to 19: tests/test_seams_sockets.py) has one test per piece that checks the upstream
behaviour itself, so a version bump that changes it fails there first, and
tests/test_layout.py fails when a private name of those frameworks is used
outside this package. The pieces live in its modules: `handler` (1 to 5,
9, 10), `server` (6, 7, 11, 14, 16, 19), `sqlite` (12), `orm` (8,
13) and `browser` (15, 17), with piece 18 in Node, browser/tap.cjs; each is imported here under its own name. Written against Django
5.2.19, djangorestframework 3.18.3, adrf 0.1.14 and daphne 4.2.3 (pinned in
requirements/base.txt), and their dependencies as installed with them:
Twisted 26.10.0, asgiref 3.13.0; and Playwright 1.65.2.

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
   `sync_to_async`, so `core.auth.AdminOnly` can run them for /admin/
   alone. Gain, docs/BENCHMARKS.md "Before and after issue 11 (py-spy)", row
   "the admin's six `MiddlewareMixin` middlewares": about 9 % of the
   worker's samples on an API request before, none after.

6. `bound_request_bodies` replaces `daphne.http_protocol.WebRequest` (daphne
   4.2.3), the class `HTTPFactory.buildProtocol` looks up in its module for
   each connection, with a subclass overriding Twisted's
   `twisted.web.http.Request.gotLength` and `handleContentChunk` (Twisted
   26.10.0) and reading the request line from the channel's `_command` and
   `_path`. Gain: memory, not time, so not a row of docs/BENCHMARKS.md: a
   500 MB POST without the key took a worker from 92 MB to 596 MB resident
   before (core/bounded_http.py); tests/test_bounds.py checks the bound on a
   real worker. It also overrides `requestReceived` and `connectionLost`:
   a request the server chooses to stream (an upload, media_store/uploads.py)
   has its body written to a sink as it arrives instead of Twisted's buffer,
   and reaches daphne with an empty one, since daphne's `process` reads the
   whole buffer into the application's queue at once (`self.content.read`,
   in `request_buffer_size` chunks put with `put_nowait`): a 100 MB upload
   would otherwise sit in memory twice. tests/test_uploads.py checks it.
   A request the server answers itself, at once or later (an upload's wrong
   key, at its turn: `AnswerLater`, written with the channel's `callLater`),
   never reaches daphne: `requestReceived` stops there, so an answer is
   never followed by the application's own (tests/test_seams.py). The
   choice is given the client's address as daphne reads it (the request's
   `client`), the application's REMOTE_ADDR.
   And it overrides daphne's `basic_error` for a 400 (a header name or
   value daphne refuses, answered with its HTML page): the envelope instead,
   checked by tests/test_envelopes.py.

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
   tests/test_head_bound.py on a real worker and waker. It also overrides
   `_respondToBadRequestAndDisconnect`, Twisted's one bare `400` with no
   body, written wherever it finds a request malformed (a raw 0xFF or NUL
   byte in the request line, a header line that is no header, a malformed
   chunked body): 400 with the envelope instead, checked by
   tests/test_envelopes.py on a real worker and pinned by tests/test_seams.py.

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

9. `close_with` adds a callback to a response's `_resource_closers`, the
   list `django.http.HttpResponseBase.close` (Django 5.2.19) runs once
   each, then empties; Django's own `FileResponse` closes its file so. No
   public hook runs at a response's close (`request_finished` does not say
   which response). It buys behaviour: a download whose client left before
   its stream started still ends in the request log (its
   middleware, activity/middleware.py) and frees its one-shot link
   (media_store/views.py).

10. `django_request_of` reads the Django `HttpRequest` a DRF `Request`
    wraps from its `_request` (`rest_framework.request.Request.__init__`,
    DRF 3.18.3): DRF offers no public way to it. core/rest.py's parser
    reads the body from it; core/auth.py caches a key's role on it (set on
    DRF's request, the value would stay on DRF's).

11. `asyncio_loop_of` reads the asyncio loop Twisted's
    `twisted.internet.asyncioreactor.AsyncioSelectorReactor` (Twisted
    26.10.0) runs on from its `_asyncioEventloop`, set in `__init__`: the
    loop daphne 4.2.3 installed the reactor with, where everything must run
    (core/serving.py, `event_loop`). Twisted offers no public way to it.

12. `run_sqlite_script` runs a script on the `sqlite3.Connection` that
    Django's SQLite wrapper holds in its `connection` attribute (Django
    5.2.19, `BaseDatabaseWrapper.connect`), undocumented, inside its
    `wrap_database_errors`. A Django cursor's `execute` steps a PRAGMA
    once, and `incremental_vacuum` frees one page a step; `executescript`
    steps each statement to its end (core/db_thread.py, the store's
    vacuums).

13. `take_saved_row` makes one model instance another by copying its
    `__dict__`, where Django 5.2.19 keeps each field's value under its
    `attname`, `_state` and its caches (`Model.__init__`,
    `Model.from_db`). schedules/admin.py: the admin's messages and redirect
    read the object it handed to `save_model`, which the schedule services
    save as an instance of their own.

14. `name_statuses` replaces `daphne.http_protocol.WebRequest` (daphne
    4.2.3) again, with a subclass overriding Twisted's
    `twisted.web.http.Request.setResponseCode` (Twisted 26.10.0): daphne
    calls it with the status alone, and Twisted then takes the reason
    phrase from its `RESPONSES` table, which has none for 422, 423 and 429
    (it writes `Unknown Status`) and older ones for others (`Request
    Time-out`). The subclass passes the standard phrase
    (core/serving.py, `reason_phrase`). No speed gain: it buys behaviour
    (`HTTP/1.1 429 Too Many Requests`), checked by
    tests/test_queue.py on a real worker.

15. `download_file_of` reads the path a running download is written to from
    its artifact's `_initializer["absolutePath"]` (Playwright 1.65.2: the
    server's `ArtifactDispatcher` sends it with the artifact, and the
    public `Download.path()` waits for the download's end). With it a
    download past DOWNLOAD_MAX_MB is cancelled as it grows, not once it is
    whole (plugins/downloads.py). tests/test_seams.py checks that the path
    is known at the start and grows while the download runs.

16. `size_socket_messages` replaces `daphne.ws_protocol.WebSocketFactory`'s
    protocol (daphne 4.2.3) with a subclass whose `onConnect` sets
    autobahn's `maxMessagePayloadSize` on its own connection from the
    request's path. daphne sets one limit, on the factory, for every
    socket (1 MiB by default, in and out); a CDP client's messages
    (screenshots, page contents, a file's bytes) reach 64 MiB, while the other sockets keep the 1 MiB. On
    those sockets it also sets autobahn's `failByDrop` off (daphne's factory
    leaves it on, so a message past the limit dropped the connection
    without a close frame; now it gets 1009) and, on the worker, its
    `closeHandshakeTimeout` to CDP_CLOSE_WAIT_S (a client that reads slowly
    still reads up to its 4008). The subclass also
    sends a `websocket.close`'s `reason` with its code, which daphne's
    `handle_reply` drops: a CDP client reads why its connection ended. No
    speed gain: it buys behaviour, checked by tests/test_cdp.py (a 20 MB
    message both ways, the reasons of its closes), tests/test_cdp_flow.py
    (1009, 4008) and tests/test_seams_sockets.py.

17. `send_cdp` sends a CDP message on a Playwright `CDPSession` through
    its connection's `send_message_to_server` as an internal call
    (Playwright 1.65.2, `_impl_obj._connection`), where the public
    `CDPSession.send` is a coroutine that sends once it is scheduled and
    passes Playwright's API-call wrapper first (its zone, parameter
    validation and instrumentation). The mux (cdp/mux.py) sends every
    message of every CDP client so. `on_cdp_events` listens to a
    `CDPSession`'s events on the same implementation object, whose
    `on("event")` passes each event as it came; the public `on` wraps the
    listener in one that reads its signature (`inspect.signature`) at
    every event. Gain, docs/BENCHMARKS.md "Issue 43": a CDP step through
    the worker. `plugins/signing_in.py` sends and listens so; the CDP
    clients' messages go through piece 18 now.

18. The driver tap (browser/tap.cjs, loaded into Playwright's driver by
    NODE_OPTIONS's `--require`) replaces the read end of Chromium's
    debugging pipe that Playwright's driver reads (Playwright 1.65.2). It
    relies on three things of the driver: it spawns Chromium through
    Node's `child_process.spawn`, looked up at each call (esbuild's
    `__toESM` getters); with `--remote-debugging-pipe` among the
    arguments; and it builds its `PipeTransport` from the child's
    `stdio[3]` and `stdio[4]` after `spawn` returns, listening to
    `stdio[4]`'s `data`, `close` and `error` and reading its `readable`.
    And on Chromium's: a flat session's message ends with its
    `"sessionId"`. Gain, docs/BENCHMARKS.md "Issue 43": a CDP client's
    step skips Playwright's protocol on both sides of the driver.

19. `send_at_once` sends a WebSocket's ASGI message without awaiting
    daphne's `send` (daphne 4.2.3): `send` is
    `partial(Server.handle_reply, protocol)`, a coroutine that, for a
    socket's message, checks `Server.connections` and calls the
    protocol's `handle_reply`; this does the same from a plain callback.
    A CDP connection (cdp/sockets.py) sends Chromium's answers so, as they
    arrive from the tap, where a task woken for each would cost a turn of
    the event loop. Gain, docs/BENCHMARKS.md "Issue 43".

Removed: `ApiView.default_response_headers` (an override of DRF 3.18.3's
`APIView.default_response_headers` returning `{}`). Only DRF's and adrf's
dispatch read that property, and piece 4 replaced both, so it never ran:
no gain to measure, and no answer changes without it.

Relied on, not overridden (tested beside the pieces): core/db_thread.py
keeps one SQLite connection open on its own thread because Django's
connections belong to a thread (`ConnectionHandler.thread_critical`), not to
an asyncio context. It subclasses and patches nothing of Django: it calls
its thread with `run_in_executor` instead of asgiref's `sync_to_async`, a
choice among public APIs. Used anywhere: the underscored names Django
documents as its models' public API (`Model._meta`, `Model._state`,
`Model._default_manager`).
"""

from __future__ import annotations

from core.seams.browser import download_file_of, on_cdp_events, send_cdp
from core.seams.handler import (
    THREADLESS_PREFIX,
    InlineDispatch,
    MiddlewareChain,
    ThreadlessApiHandler,
    WholeBodyRequest,
    close_old_connections_off_loop,
    close_with,
    django_request_of,
    keep_request_started_off_api,
    request_started_outside_api,
)
from core.seams.orm import insert_row, take_saved_row
from core.seams.server import (
    STREAMED_HEADER,
    AnswerLater,
    BodySink,
    StreamChoice,
    asyncio_loop_of,
    bound_request_bodies,
    bound_request_heads,
    name_statuses,
    send_at_once,
    size_socket_messages,
)
from core.seams.sqlite import run_sqlite_script

__all__ = [
    "THREADLESS_PREFIX",
    "InlineDispatch",
    "MiddlewareChain",
    "ThreadlessApiHandler",
    "WholeBodyRequest",
    "asyncio_loop_of",
    "STREAMED_HEADER",
    "AnswerLater",
    "BodySink",
    "StreamChoice",
    "bound_request_bodies",
    "bound_request_heads",
    "close_old_connections_off_loop",
    "close_with",
    "django_request_of",
    "download_file_of",
    "insert_row",
    "keep_request_started_off_api",
    "name_statuses",
    "on_cdp_events",
    "request_started_outside_api",
    "run_sqlite_script",
    "send_cdp",
    "send_at_once",
    "size_socket_messages",
    "take_saved_row",
]
