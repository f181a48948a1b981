"""Seams in daphne and Twisted: daphne's request class (pieces 6 and 14),
Twisted's HTTP channel (7), the reactor's asyncio loop (11), and daphne's
sockets (16, 19); docs/design/SEAMS.md says what each replaces, why, and
what it pays. Nothing of Twisted or daphne is imported at the top: Twisted's modules are
import-order sensitive (core/serving.py), and this package is imported
before the reactor is installed."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings

# --- 6. daphne's request class -----------------------------------------------------------


class BodySink(Protocol):
    """Where a streamed request's body goes, as it arrives (`stream_bodies`)."""

    limit: int  # the most bytes it takes

    def write(self, data: bytes) -> None: ...

    def finish(self) -> str:
        """The whole body is in: answers the value the application finds in the marker header."""

    def too_large(self) -> bytes:
        """The whole answer for a body past `limit` (the sink is aborted first)."""

    def abort(self) -> None:
        """The body will not be finished: whatever was written goes."""


@dataclass(frozen=True)
class AnswerLater:
    """A choice's answer that is due later (a wrong key's, at its turn,
    core/wrong_keys.py): the whole `answer`, written `delay_s` from now. The
    body is read meanwhile and dropped, the application never sees the
    request, and `done()` runs once the answer is written or the client has
    gone (whichever comes first)."""

    answer: bytes
    delay_s: float
    done: Callable[[], None]


# Chooses, from a request's method, path, headers (lower-case names),
# declared length and client address (daphne's, as the application's
# REMOTE_ADDR), before its body is read: None (buffered as usual, within
# MAX_BODY_BYTES), a BodySink (streamed there), bytes (the whole answer,
# written at once; the body is never read) or an AnswerLater.
StreamChoice = Callable[[str, str, dict[str, str], "int | None", str], "BodySink | bytes | AnswerLater | None"]


# The header a streamed request reaches the application with (its sink's `finish()`).
STREAMED_HEADER = b"penelope-streamed"


def bound_request_bodies(
    refusal: Callable[[str, str, str], bytes],
    streams: Mapping[str, StreamChoice] | None = None,
    malformed: Callable[[str, str], bytes] | None = None,
) -> type:
    """Make daphne build every HTTP request as a subclass of its WebRequest
    that refuses a body past DATA_UPLOAD_MAX_MEMORY_SIZE as it arrives:
    `refusal(method, path, what)` gives the whole answer, written before the
    connection is closed and nothing more of the body is read.

    `streams` names the paths (without a trailing slash) whose requests may
    be streamed, each with its choice; only a request to one of them has its
    headers read for it. A request its choice gives a BodySink for has its
    body written to the sink as it arrives, bounded by the sink's own limit,
    and reaches the application with an empty body and the sink's `finish()`
    in the STREAMED_HEADER; a client's own such header is removed from every
    request, so only the sink sets it.

    Given `malformed`, a request daphne refuses with its own bare page
    (`basic_error` with 400: a header name or value it does not take) gets
    `malformed(method, path)` instead (the whole answer), and the connection
    is closed. Call it before the server runs; answers the class.
    daphne is imported here, not at the top: Twisted's modules are
    import-order sensitive (core/serving.py)."""
    from daphne import http_protocol

    class BoundedRequest(http_protocol.WebRequest):
        _body_bytes = 0
        _refused = False
        _sink: BodySink | None = None
        _later: Any = None  # the delayed call of an AnswerLater, until it runs

        def gotLength(self, length: int | None) -> None:  # noqa: N802 - Twisted's name
            self.requestHeaders.removeHeader(STREAMED_HEADER)
            choose = None
            if streams:
                method, path = self._request_line()
                choose = streams.get(path.rstrip("/"))
            if choose is not None:
                headers = {
                    name.decode("latin-1").lower(): values[-1].decode("latin-1")
                    for name, values in self.requestHeaders.getAllRawHeaders()
                }
                chosen = choose(method, path, headers, length, self._client_address())
                if isinstance(chosen, bytes):
                    self._answer(chosen)
                    return
                if isinstance(chosen, AnswerLater):
                    self._answer_later(chosen)
                    return
                if chosen is not None:
                    self._sink = chosen
                    self.content = io.BytesIO()  # what daphne reads: the body stays in the sink
                    if length is not None and length > chosen.limit:
                        self._too_large()
                    return
            if length is not None and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                self._refuse(f"declared {length} bytes")
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
            if self._refused:
                return
            self._body_bytes += len(data)
            if self._sink is not None:
                if self._body_bytes > self._sink.limit:
                    self._too_large()
                else:
                    self._sink.write(data)
                return
            if self._body_bytes > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                self._refuse(f"more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes received")
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:  # noqa: N802
            if self._refused:  # answered here, or to be: the application never sees it
                return
            if self._sink is not None:
                sink, self._sink = self._sink, None
                self.requestHeaders.setRawHeaders(STREAMED_HEADER, [sink.finish().encode("latin-1")])
            super().requestReceived(command, path, version)

        def connectionLost(self, reason: Any) -> None:  # noqa: N802 - Twisted's name
            if self._sink is not None:  # gone before its body was whole
                sink, self._sink = self._sink, None
                sink.abort()
            if self._later is not None:  # gone before its answer was due
                (call, done), self._later = self._later, None
                call.cancel()
                done()
            super().connectionLost(reason)

        def basic_error(self, status: int, status_text: bytes, body: str) -> None:
            if malformed is None or status != 400:
                super().basic_error(status, status_text, body)
                return
            method = (self.method or b"").decode("latin-1")
            path = (self.path or b"").decode("latin-1")
            self._answer(malformed(method, path))

        def _request_line(self) -> tuple[str, str]:
            # The request line as the channel parsed it: the request's own
            # `method` and `uri` are set only once the whole body is in.
            method = getattr(self.channel, "_command", b"").decode("latin-1")
            path = getattr(self.channel, "_path", b"").decode("latin-1").split("?", 1)[0]
            return method, path

        def _client_address(self) -> str:
            # What daphne puts in the scope's `client` (its `process`), so
            # the application's REMOTE_ADDR; a socket without one, "unknown"
            # (core/wrong_keys.py, `address_of`).
            if hasattr(self.client, "host") and hasattr(self.client, "port"):
                return str(self.client.host)
            return "unknown"

        def _answer_later(self, later: AnswerLater) -> None:
            # Refused now, answered later: the body's pieces are dropped as
            # they come (handleContentChunk), and a whole request is not
            # given to daphne (requestReceived); past it, Twisted's channel
            # buffers a little and stops reading.
            self._refused = True
            self.content = io.BytesIO()

            def due() -> None:
                if self._later is None:
                    return
                _, done = self._later
                self._later = None
                transport = self.channel.transport
                transport.write(later.answer)
                transport.loseConnection()
                done()

            self._later = (self.channel.callLater(max(0.0, later.delay_s), due), later.done)

        def _too_large(self) -> None:
            sink, self._sink = self._sink, None
            sink.abort()
            self._answer(sink.too_large())

        def _refuse(self, what: str) -> None:
            self._answer(refusal(*self._request_line(), what))

        def _answer(self, answer: bytes) -> None:
            self._refused = True
            self.content = io.BytesIO()  # what Twisted closes at the end of the request
            transport = self.channel.transport
            transport.write(answer)
            transport.loseConnection()  # stops reading: the rest of the body is never received

    http_protocol.WebRequest = BoundedRequest
    return BoundedRequest


# --- 7. Twisted's HTTP channel, under daphne's factory ----------------------------------


def bound_request_heads(
    limit: int,
    refusal: Callable[[str, str], bytes],
    too_many: Callable[[str, str], bytes] | None = None,
    malformed: Callable[[str, str], bytes] | None = None,
) -> type:
    """Make daphne read every HTTP/1.1 connection with a subclass of Twisted's
    HTTPChannel that, when a request's line and headers pass `limit` bytes
    (one line, or all of them together, counted as Twisted counts them:
    without their line ends), writes `refusal(method, path)` (the whole
    answer) and closes the connection, where Twisted would answer a bare 400
    or close without a word; and, given `too_many`, writes
    `too_many(method, path)` for a request with more headers than Twisted
    takes (its `maxHeaders`, 500), where it answered a bare 400; and, given
    `malformed`, writes `malformed(method, path)` wherever else Twisted
    answers its bare 400 (`_respondToBadRequestAndDisconnect`): a request
    line that is not `method target version` in printable ASCII (a raw 0xFF
    or NUL byte in it), a header line without a colon or with NUL, CR or LF
    in its value, a Content-Length that is no number, a malformed chunked
    body. Call it before the server runs; answers the class."""
    from daphne import http_protocol
    from twisted.web import http

    class BoundedChannel(http.HTTPChannel):
        MAX_LENGTH = limit  # one line (LineReceiver)
        totalHeadersSize = limit  # the request line and the headers together (HTTPChannel)

        _line = b""  # the last line received, for a refusal of a request line not parsed

        def lineReceived(self, line: bytes) -> None:  # noqa: N802 - Twisted's name
            self._line = line
            # Twisted's own check, made first: past it Twisted answers a bare 400.
            if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
                self._refuse_head(line)
                return None
            return super().lineReceived(line)

        def lineLengthExceeded(self, line: bytes) -> None:  # noqa: N802 - Twisted's name
            self._refuse_head(line)

        def headerReceived(self, line: bytes) -> bool:  # noqa: N802 - Twisted's name
            # Twisted counts a header once it has stored it, and answers a
            # bare 400 for the one past `maxHeaders`: that one is refused here first.
            if too_many is not None and self._receivedHeaderCount >= self.maxHeaders:
                self._refuse_head(line, too_many)
                return False
            return super().headerReceived(line)

        def _respondToBadRequestAndDisconnect(self) -> None:  # noqa: N802 - Twisted's name
            # Twisted's one bare 400, written wherever it finds the request malformed.
            if malformed is None:
                super()._respondToBadRequestAndDisconnect()
                return
            self._refuse_head(self._line, malformed)

        def _refuse_head(self, received: bytes, answer: Callable[[str, str], bytes] = refusal) -> None:
            # The request line as the channel parsed it, when the line past the
            # bound is a header; else what arrived of the request line itself.
            method, target = getattr(self, "_command", None), getattr(self, "_path", None)
            if method is None or target is None:
                first = received.split(b"\r\n", 1)[0]
                method, _, rest = first.partition(b" ")
                target = rest.split(b" ", 1)[0]
            path = target.decode("latin-1").split("?", 1)[0]
            self.transport.write(answer(method.decode("latin-1"), path))
            self.loseConnection()  # as Twisted's own refusal does: nothing more is read

    def protocol(factory: http.HTTPFactory) -> http._GenericHTTPChannelProtocol:
        return http._GenericHTTPChannelProtocol(BoundedChannel())

    http_protocol.HTTPFactory.protocol = protocol
    return BoundedChannel


# --- 11. the reactor's asyncio loop -------------------------------------------------------


def asyncio_loop_of(reactor: Any) -> asyncio.AbstractEventLoop:
    """The asyncio loop Twisted's asyncio reactor runs on (it keeps it in
    `_asyncioEventloop`): the one daphne installed the reactor with, where
    the server, the browser and every task must run."""
    return reactor._asyncioEventloop


# --- 14. the reason phrase of each status -----------------------------------------------


def name_statuses(phrase: Callable[[int], bytes | None]) -> type:
    """Make daphne answer each status with `phrase(status)` on the status
    line (`HTTP/1.1 429 Too Many Requests`), where Twisted's table has none
    for some statuses (it writes `Unknown Status`) and an older one for
    others; a status `phrase` gives None for keeps Twisted's. Call it before
    the server runs; answers the class. It subclasses the request class
    daphne builds at the time of the call (piece 6's, once that is made),
    so the two pieces stack in either order."""
    from daphne import http_protocol

    class NamedStatusRequest(http_protocol.WebRequest):
        def setResponseCode(self, code: int, message: bytes | None = None) -> None:  # noqa: N802 - Twisted's name
            super().setResponseCode(code, phrase(code) if message is None else message)

    http_protocol.WebRequest = NamedStatusRequest
    return NamedStatusRequest


# --- 16. the size of a WebSocket message, by path, and a close's reason --------------------


def size_socket_messages(limit_of: Callable[[str], int | None], close_wait_s: float | None = None) -> type:
    """Make daphne take and send WebSocket messages (and frames) up to
    `limit_of(path)` bytes on the sockets whose path it names, where every
    socket has one limit (the Server's `websocket_max_message_size` and
    `websocket_max_frame_size`, set on its factory): autobahn copies the
    factory's values onto each protocol when its connection is made, and
    reads them from the protocol for every frame and message, so values set
    in `onConnect` (which has the request's path) hold for that connection
    alone. A path `limit_of` gives None for keeps the factory's.

    On those sockets a message past the limit is refused with a close frame,
    1009 and autobahn's reason, where autobahn's `failByDrop` (True on
    daphne's factory) drops the connection without one; and, given
    `close_wait_s`, a close the server starts waits that long for the
    client's (autobahn's `closeHandshakeTimeout`, 1 s), so a client that
    was reading slowly can still read up to the close.

    And send a `websocket.close`'s `reason` (ASGI's, since spec 2.3) with
    its code, which daphne drops (`serverClose` takes the code alone).

    Call it before the server runs; answers the class."""
    from daphne import ws_protocol

    class SizedWebSocketProtocol(ws_protocol.WebSocketProtocol):
        def onConnect(self, request: Any) -> Any:  # noqa: N802 - autobahn's name
            limit = limit_of(request.path)
            if limit is not None:
                self.maxMessagePayloadSize = self.maxFramePayloadSize = limit
                self.failByDrop = False
                if close_wait_s is not None:
                    self.closeHandshakeTimeout = close_wait_s
            return super().onConnect(request)

        def handle_reply(self, message: dict[str, Any]) -> None:
            reason = message.get("reason") if message.get("type") == "websocket.close" else None
            if reason and self.state != self.STATE_CONNECTING:
                self.sendClose(code=message.get("code") or 1000, reason=reason)
                return
            super().handle_reply(message)

    ws_protocol.WebSocketFactory.protocol = SizedWebSocketProtocol
    return SizedWebSocketProtocol
