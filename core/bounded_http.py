"""Requests bounded before they are buffered, for the worker and the waker:
their bodies, and their request line and headers.

Twisted reads a request's whole body (into memory, or a temporary file past
100 KB) before daphne hands the request to Django, so Django's
DATA_UPLOAD_MAX_MEMORY_SIZE and the key are checked only once every byte is
in: a 500 MB POST without the key took a worker from 92 MB to 596 MB
resident. Here the bound (MAX_BODY_BYTES, Django's
DATA_UPLOAD_MAX_MEMORY_SIZE) is checked as the body arrives: a declared
`Content-Length` past it, or received bytes past it (a chunked body), answer
413 with the envelope at once, and the connection is closed without reading
further. So a request costs at most MAX_BODY_BYTES, with or without the key.

The request line and the headers together are bounded by MAX_HEAD_BYTES
(Twisted's own figure, 16 KiB, counted as Twisted counts it: the lines
without their line ends). Past it, where Twisted answered a bare 400 or
closed the connection without a word, the answer is 414 with the envelope,
naming the bound and saying to send the parameters as a POST body (a long
GET query string is what passes it); the connection is then closed. A
request with more than MAX_HEADERS (Twisted's 500) headers, where Twisted
answered a bare 400, answers 400 with the envelope, and is closed too.

Every other request Twisted or daphne finds malformed before the
application sees it, where they answered a bare `400` (Twisted: no body at
all) or daphne's HTML page, answers 400 with the envelope
(`malformed_sentence`) and is closed: a request line that is not `method
target HTTP/1.x` in printable ASCII (a raw 0xFF or NUL byte in its target),
a header line that is no header, a header value with a byte HTTP does not
allow, a Content-Length that is no number, a malformed chunked body.

This module says what the refusals answer; how they are hooked into daphne
and Twisted are framework seams (core/seams/, `bound_request_bodies` and
`bound_request_heads`). `tests/test_bounds.py` and `tests/test_head_bound.py`
check the bounds on a real worker and waker.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

from django.conf import settings

from core.api import error_body
from core.seams import StreamChoice, bound_request_bodies, bound_request_heads

log = logging.getLogger("penelope.serving")

# The most bytes a request's line and headers may take together (without
# their line ends); docs/reference/API.md and the OpenAPI document state it.
MAX_HEAD_BYTES = 16384
# The most headers a request may have: Twisted's own figure (HTTPChannel.maxHeaders).
MAX_HEADERS = 500


def head_refusal_sentence(server_name: str) -> str:
    return (
        f"The request line and headers are longer than the {server_name} accepts ({MAX_HEAD_BYTES} bytes "
        "together); send the parameters as a POST body."
    )


def too_many_headers_sentence(server_name: str) -> str:
    return f"The request has more than {MAX_HEADERS} headers, more than the {server_name} accepts; send fewer."


def malformed_sentence(server_name: str) -> str:
    return (
        f"The request is not well-formed HTTP/1.1 (its request line, a header, or its body's framing), so the "
        f"{server_name} read no further; send the target in printable ASCII (percent-encode other bytes) and "
        "well-formed headers."
    )


def envelope_answer(
    status_line: bytes, message: str, page_id: str | None, headers: dict[str, str] | None = None
) -> bytes:
    """A whole HTTP/1.1 answer with the error envelope, closing the connection."""
    body = json.dumps(error_body(message, page_id), separators=(",", ":")).encode()
    more = b"".join(f"{name}: {value}\r\n".encode("latin-1") for name, value in (headers or {}).items())
    return (
        b"HTTP/1.1 " + status_line + b"\r\n"
        b"Content-Type: application/json\r\n" + more + b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"X-Frame-Options: DENY\r\n"  # as every API answer has it (core/rest.py)
        b"Connection: close\r\n\r\n" + body
    )


def install(
    server_name: str, page_of: Callable[[str], str | None] | None = None,
    streams: Mapping[str, StreamChoice] | None = None,
) -> None:
    """Make daphne refuse a body past MAX_BODY_BYTES as it arrives, and a
    request line and headers past MAX_HEAD_BYTES (before the server runs).
    `server_name` ("worker" or "waker") is said in the sentences;
    `page_of(path)` gives the envelope's page_id, as the view would have;
    `streams` chooses, by path, the requests whose bodies go elsewhere as they
    arrive (an upload's, media_store/uploads.py), each with its own bound."""

    def page(path: str) -> str | None:
        return page_of(path) if page_of is not None else None

    def refusal(method: str, path: str, what: str) -> bytes:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"The request body is larger than the {server_name} accepts (MAX_BODY_BYTES, {limit} bytes)."
        log.info("refused a request body past MAX_BODY_BYTES (%s): %s %s", what, method, path[:200])
        return envelope_answer(b"413 Request Entity Too Large", message, page(path))

    def head_refusal(method: str, path: str) -> bytes:
        log.info("refused a request line and headers past %d bytes: %s %s", MAX_HEAD_BYTES, method[:20], path[:200])
        return envelope_answer(b"414 URI Too Long", head_refusal_sentence(server_name), page(path))

    def too_many_headers(method: str, path: str) -> bytes:
        log.info("refused a request with more than %d headers: %s %s", MAX_HEADERS, method[:20], path[:200])
        return envelope_answer(b"400 Bad Request", too_many_headers_sentence(server_name), page(path))

    def malformed(method: str, path: str) -> bytes:
        log.info("refused a malformed request: %r %r", method[:20], path[:200])
        return envelope_answer(b"400 Bad Request", malformed_sentence(server_name), page(path))

    bound_request_bodies(refusal, streams, malformed)
    bound_request_heads(MAX_HEAD_BYTES, head_refusal, too_many_headers, malformed)
