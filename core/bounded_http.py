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

This module says what the refusal answers; how it is hooked into daphne and
Twisted is a framework seam (core/seams.py, `bound_request_bodies`).
`tests/test_bounds.py` checks the bound on a real worker.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from django.conf import settings

from core.api import error_body
from core.seams import bound_request_bodies

log = logging.getLogger("penelope.serving")


def install(server_name: str, page_of: Callable[[str], str | None] | None = None) -> None:
    """Make daphne refuse a body past MAX_BODY_BYTES as it arrives (before the
    server runs). `server_name` ("worker" or "waker") is said in the sentence;
    `page_of(path)` gives the envelope's page_id, as the view would have."""

    def refusal(method: str, path: str, what: str) -> bytes:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"The request body is larger than the {server_name} accepts (MAX_BODY_BYTES, {limit} bytes)."
        page_id = page_of(path) if page_of is not None else None
        body = json.dumps(error_body(message, page_id), separators=(",", ":")).encode()
        log.info("refused a request body past MAX_BODY_BYTES (%s): %s %s", what, method, path[:200])
        return (
            b"HTTP/1.1 413 Request Entity Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n"
            b"Connection: close\r\n\r\n" + body
        )

    bound_request_bodies(refusal)
