"""Where the project reaches into its frameworks: every override of a Django,
DRF, adrf, daphne or Twisted internal, and every use of a private name of
theirs (or of Playwright's or autobahn's), and nothing else.

docs/design/SEAMS.md has one row per piece: what it replaces, why, what it
was measured to pay with and without it (or the test that shows the
behaviour it buys), and the versions it was checked against.
tests/test_seams.py and tests/test_seams_sockets.py check, piece by piece,
the upstream behaviour each relies on, with messages that name the piece;
tests/test_layout.py fails when a private name of those frameworks is used
outside this package. The pieces live in its modules: `handler` (1, 3 to
5, 9, 10), `server` (6, 7, 11, 14, 16), `sqlite` (12), `orm` (8, 13) and
`browser` (15), with piece 18 in Node, browser/tap.cjs; each is imported
here under its own name. Pieces 2, 17 and 19 went back to the frameworks'
public API."""

from __future__ import annotations

from core.seams.browser import download_file_of
from core.seams.handler import (
    THREADLESS_PREFIX,
    InlineDispatch,
    MiddlewareChain,
    ThreadlessApiHandler,
    WholeBodyRequest,
    close_with,
    django_request_of,
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
    "close_with",
    "django_request_of",
    "download_file_of",
    "insert_row",
    "name_statuses",
    "run_sqlite_script",
    "size_socket_messages",
    "take_saved_row",
]
