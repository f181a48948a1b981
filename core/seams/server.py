"""Seams in daphne and Twisted: daphne's request class (pieces 6 and 14),
Twisted's HTTP channel (7) and the reactor's asyncio loop (11).
core/seams/__init__.py says what each replaces or relies on, and why.

Nothing of Twisted or daphne is imported at the top: Twisted's modules are
import-order sensitive (core/serving.py), and this package is imported
before the reactor is installed."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

from django.conf import settings

# --- 6. daphne's request class -----------------------------------------------------------


def bound_request_bodies(refusal: Callable[[str, str, str], bytes]) -> type:
    """Make daphne build every HTTP request as a subclass of its WebRequest
    that refuses a body past DATA_UPLOAD_MAX_MEMORY_SIZE as it arrives:
    `refusal(method, path, what)` gives the whole answer, written before the
    connection is closed and nothing more of the body is read. Call it before
    the server runs; answers the class. daphne is imported here, not at the
    top: Twisted's modules are import-order sensitive (core/serving.py)."""
    from daphne import http_protocol

    class BoundedRequest(http_protocol.WebRequest):
        _body_bytes = 0
        _refused = False

        def gotLength(self, length: int | None) -> None:  # noqa: N802 - Twisted's name
            if length is not None and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                self._refuse(f"declared {length} bytes")
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
            if self._refused:
                return
            self._body_bytes += len(data)
            if self._body_bytes > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                self._refuse(f"more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes received")
                return
            super().handleContentChunk(data)

        def _refuse(self, what: str) -> None:
            self._refused = True
            self.content = io.BytesIO()  # what Twisted closes at the end of the request
            # The request line as the channel parsed it: the request's own
            # `method` and `uri` are set only once the whole body is in.
            method = getattr(self.channel, "_command", b"").decode("latin-1")
            path = getattr(self.channel, "_path", b"").decode("latin-1").split("?", 1)[0]
            transport = self.channel.transport
            transport.write(refusal(method, path, what))
            transport.loseConnection()  # stops reading: the rest of the body is never received

    http_protocol.WebRequest = BoundedRequest
    return BoundedRequest


# --- 7. Twisted's HTTP channel, under daphne's factory ----------------------------------


def bound_request_heads(
    limit: int, refusal: Callable[[str, str], bytes], too_many: Callable[[str, str], bytes] | None = None
) -> type:
    """Make daphne read every HTTP/1.1 connection with a subclass of Twisted's
    HTTPChannel that, when a request's line and headers pass `limit` bytes
    (one line, or all of them together, counted as Twisted counts them:
    without their line ends), writes `refusal(method, path)` (the whole
    answer) and closes the connection, where Twisted would answer a bare 400
    or close without a word; and, given `too_many`, writes
    `too_many(method, path)` for a request with more headers than Twisted
    takes (its `maxHeaders`, 500), where it answered a bare 400. Call it
    before the server runs; answers the class."""
    from daphne import http_protocol
    from twisted.web import http

    class BoundedChannel(http.HTTPChannel):
        MAX_LENGTH = limit  # one line (LineReceiver)
        totalHeadersSize = limit  # the request line and the headers together (HTTPChannel)

        def lineReceived(self, line: bytes) -> None:  # noqa: N802 - Twisted's name
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
