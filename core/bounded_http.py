"""Request bodies bounded before they are buffered, for the worker and the waker.

Twisted reads a request's whole body (into memory, or a temporary file past
100 KB) before daphne hands the request to Django, so Django's
DATA_UPLOAD_MAX_MEMORY_SIZE and the key are checked only once every byte is
in: a 500 MB POST without the key took a worker from 92 MB to 596 MB
resident. Here the bound (MAX_BODY_BYTES, Django's
DATA_UPLOAD_MAX_MEMORY_SIZE) is checked as the body arrives: a declared
`Content-Length` past it, or received bytes past it (a chunked body), answer
413 with the envelope at once, and the connection is closed without reading
further. So a request costs at most MAX_BODY_BYTES, with or without the key.

Override of a framework, fenced: daphne 4.2.3's `HTTPFactory.buildProtocol`
gives each connection `daphne.http_protocol.WebRequest`, looked up in its
module when a connection is made; `install()` puts `BoundedRequest` there.
The request line is read from Twisted's `HTTPChannel._command` and `_path`
(Twisted sets a request's own only once its body is in).
`tests/test_bounds.py` fails loudly if either changes.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable

from daphne import http_protocol
from django.conf import settings

log = logging.getLogger("penelope.serving")

# Who refuses: "worker" or "waker", for the sentence; and the page a path
# names, for the envelope's page_id, as the view would have answered it.
_server_name = "worker"
_page_of: Callable[[str], str | None] = lambda path: None  # noqa: E731


class BoundedRequest(http_protocol.WebRequest):
    """daphne's request, refusing a body past MAX_BODY_BYTES as it arrives."""

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
        """Answer 413 with the envelope and close the connection: nothing
        more of the body is read, nothing of it is kept."""
        self._refused = True
        self.content = io.BytesIO()  # what Twisted closes at the end of the request
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        # The request line as the channel parsed it: the request's own `method`
        # and `uri` are set only once the whole body is in.
        method = getattr(self.channel, "_command", b"").decode("latin-1")
        path = getattr(self.channel, "_path", b"").decode("latin-1").split("?", 1)[0]
        body = json.dumps(
            {
                "success": False,
                "error": f"The request body is larger than the {_server_name} accepts (MAX_BODY_BYTES, {limit} bytes).",
                "page_id": _page_of(path),
            },
            separators=(",", ":"),
        ).encode()
        head = (
            b"HTTP/1.1 413 Request Entity Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n"
            b"Connection: close\r\n\r\n"
        )
        log.info("refused a request body past MAX_BODY_BYTES (%s): %s %s", what, method, path[:200])
        transport = self.channel.transport
        transport.write(head + body)
        transport.loseConnection()  # stops reading: the rest of the body is never received


def install(server_name: str, page_of: Callable[[str], str | None] | None = None) -> None:
    """Make daphne build every request as a BoundedRequest (before the server runs)."""
    global _server_name, _page_of
    _server_name = server_name
    if page_of is not None:
        _page_of = page_of
    http_protocol.WebRequest = BoundedRequest
