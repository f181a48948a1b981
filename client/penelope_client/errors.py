"""The errors a worker or a waker answers, one class per kind of answer, so a
caller branches on what to do next: fix the request (`Refused`), wait and try
again (`Busy`, `Unavailable`), take or renew the lease (`Leased`), ..."""

from __future__ import annotations

from typing import Any

import httpx


class PenelopeError(Exception):
    """An error answer: its HTTP `status`, the envelope's `error` (one sentence
    for a person) and the `page_id` it concerns (or None)."""

    def __init__(self, status: int, error: str, page_id: str | None = None) -> None:
        super().__init__(f"{status}: {error}")
        self.status = status
        self.error = error
        self.page_id = page_id


class Refused(PenelopeError):
    """400 or 422: a bad parameter, header, page id or body; the sentence names it."""


class TooLarge(Refused):
    """413: the request body is larger than the worker's MAX_BODY_BYTES."""


class Unauthorized(PenelopeError):
    """401: no key, or a wrong one."""


class Forbidden(PenelopeError):
    """403: a read key (PENELOPE_READ_KEYS) asked for more than a read: a
    start, a call, a cancel, a lease or a page change."""


class NotFound(PenelopeError):
    """404: no such page, plugin action, job, media file, persona or route; or a
    plugin's own "not found"."""


class Timeout(PenelopeError):
    """408: the plugin action ran past its time limit, or a wait inside it did."""


class Busy(PenelopeError):
    """409: the page is busy or runs a job; a job still runs (or already ended,
    for a cancel); a persona has work in flight (a stop); a plain call whose
    plugin asks a person (only a job can ask); a schedule's name is taken, or
    SCHEDULES_MAX schedules are stored."""


class QueueFull(PenelopeError):
    """429: the page's queue is full (QUEUE_MAX); `retry_after` is the worker's
    estimate, in seconds, of when there is room. Also a live link refused: the
    page holds as many as it may (MAX_LINKS_PER_PAGE), `retry_after` None."""

    retry_after: float | None = None


class Leased(PenelopeError):
    """423: the page is leased and the call does not carry that lease, or the
    lease sent is unknown or expired."""


class ServerError(PenelopeError):
    """500: an unexpected error in the worker; the details are in its log."""


class BrowserError(PenelopeError):
    """502: the browser failed the step (a navigation error), the page's
    renderer crashed or the browser stopped during the call; or,
    through the waker, the persona's worker did not answer."""


class Unavailable(PenelopeError):
    """503: MAX_JOBS jobs are held, MAX_WAITERS long-polls wait, the browser is
    being launched again (or could not be; `health()` too), the demo site is
    off; a persona's worker did not start."""


class StorageFull(PenelopeError):
    """507: the worker's media store is full (MEDIA_MAX_MB), or a plugin's
    answer is larger than its RESULT_MAX_BYTES."""


class InvalidSignature(ValueError):
    """A webhook whose signature does not verify: not from the worker, changed
    on the way, or (Standard Webhooks) replayed more than 5 minutes later."""


BY_STATUS: dict[int, type[PenelopeError]] = {
    400: Refused,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    408: Timeout,
    409: Busy,
    413: TooLarge,
    422: Refused,
    423: Leased,
    429: QueueFull,
    500: ServerError,
    502: BrowserError,
    503: Unavailable,
    507: StorageFull,
}


def error_for(response: httpx.Response) -> PenelopeError:
    """The error an answer that is not a success stands for. Any other status (a
    plugin's own, such as 418) is a plain PenelopeError."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        error, page_id = body["error"], body.get("page_id")
    else:  # not the envelope: something between the client and the worker answered
        error, page_id = (response.text.strip()[:200] or response.reason_phrase), None
    failure = BY_STATUS.get(response.status_code, PenelopeError)(response.status_code, error, page_id)
    if isinstance(failure, QueueFull) and response.headers.get("Retry-After", "").isdigit():
        failure.retry_after = float(response.headers["Retry-After"])
    return failure
