"""A client of Penelope workers and their waker, sync and async.

    from penelope_client import Penelope

    with Penelope("http://127.0.0.1:5000", key) as client:
        client.call("main", "demo/open-account", handle="alice")

docs/guides/PYTHON_CLIENT.md in the Penelope project is the guide.
"""

from __future__ import annotations

from penelope_client.aio import AsyncJob, AsyncLease, AsyncPenelope
from penelope_client.client import Job, Lease, Penelope
from penelope_client.errors import (
    BrowserError,
    Busy,
    Forbidden,
    InvalidSignature,
    Leased,
    NotFound,
    PenelopeError,
    QueueFull,
    Refused,
    ServerError,
    StorageFull,
    Timeout,
    TooLarge,
    Unauthorized,
    Unavailable,
)
from penelope_client.events import AsyncEventStream, EventStream
from penelope_client.waker import AsyncWaker, Waker
from penelope_client.webhooks import verify_notification, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "AsyncEventStream",
    "AsyncJob",
    "AsyncLease",
    "AsyncPenelope",
    "AsyncWaker",
    "BrowserError",
    "Busy",
    "EventStream",
    "Forbidden",
    "InvalidSignature",
    "Job",
    "Lease",
    "Leased",
    "NotFound",
    "Penelope",
    "PenelopeError",
    "QueueFull",
    "Refused",
    "ServerError",
    "StorageFull",
    "Timeout",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "Waker",
    "verify_notification",
    "verify_webhook",
]
