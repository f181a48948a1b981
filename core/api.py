"""The API's errors: `ApiError`, what the HTTP layer raises for an answer
other than success, and `STATUS_OF`, the one table that gives each domain
refusal (core/errors.py) its status. `core.rest` turns both (and every other
failure) into the envelope; a call's or a job's stored answer uses the same
table (`refusal`)."""

from __future__ import annotations

from typing import Any

from core import errors

API_PREFIX = "/api/v1/"


class ApiError(Exception):
    """An answer other than success: its status and one sentence for the client."""

    def __init__(self, status: int, message: str, page_id: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.page_id = page_id

    def envelope(self) -> dict[str, Any]:
        return error_body(self.message, self.page_id)


# Each domain refusal's status; a subclass takes its nearest listed base's.
STATUS_OF: dict[type[errors.DomainError], int] = {
    errors.InvalidPageId: 400,
    errors.BadAction: 400,
    errors.InvalidSchedule: 400,
    errors.NavigationRefused: 403,
    errors.PageNotOpen: 404,
    errors.NoSuchJob: 404,
    errors.NoSuchAction: 404,
    errors.NoSuchSchedule: 404,
    errors.ActionTimedOut: 408,
    errors.PageAlreadyOpen: 409,
    errors.TooManyPages: 409,
    errors.PageStaysOpen: 409,
    errors.PageBusy: 409,
    errors.JobNotCancellable: 409,
    errors.JobStillRunning: 409,
    errors.KeyInFlight: 409,
    errors.QueueTimedOut: 409,
    errors.ScheduleNameTaken: 409,
    errors.TooManySchedules: 409,
    errors.ScheduleOverlap: 409,
    errors.KeyReused: 422,
    errors.LeaseRequired: 423,
    errors.QueueFull: 429,
    errors.Cancelled: 499,  # nginx's "client closed request", as the request log uses it
    errors.ActionFailed: 500,
    errors.TabLost: 502,
    errors.BrowserStepFailed: 502,
    errors.BrowserNotRunning: 503,
    errors.JobsFull: 503,
    errors.WaitersFull: 503,
    errors.Interrupted: 503,
    errors.ResultTooLarge: 507,
    errors.StoreFull: 507,
}


def status_of(error: errors.DomainError) -> int:
    for kind in type(error).__mro__:
        status = STATUS_OF.get(kind)
        if status is not None:
            return status
    return 500


def refusal(error: errors.DomainError | ApiError, page_id: str | None = None) -> ApiError:
    """`error` as the API answers it: its status, and the envelope naming its
    page (or `page_id` when it names none)."""
    if isinstance(error, ApiError):
        status = error.status
    else:
        status = status_of(error)
    return ApiError(status, error.message, error.page_id if error.page_id is not None else page_id)


def error_body(message: str, page_id: str | None) -> dict[str, Any]:
    return {"success": False, "error": message, "page_id": page_id}


def first_line(text: str) -> str:
    """The first line of a message, at most 300 characters ("no detail" when empty)."""
    return (text or "").strip().splitlines()[0][:300] if (text or "").strip() else "no detail"


def error_line(error: BaseException) -> str:
    """`first_line` of an exception: Playwright's `message`, else its text, else its class."""
    return first_line(getattr(error, "message", None) or str(error) or type(error).__name__)


def internal_error(page_id: str | None = None) -> ApiError:
    return ApiError(500, "The worker hit an unexpected error; the details are in its log.", page_id)
