"""The API's edge: where a refusal (core/errors.py) gets its status.

`STATUS_OF` is the one table that gives each domain refusal its status;
`status_of` reads it, or the status a `StatusError` carries. `core.rest`
turns every refusal (and every other failure) into the envelope; a call's
or a job's stored answer uses the same reading (`refusal`).

`StatusError` is a refusal whose status is its whole meaning, chosen by its
raiser: the HTTP layer's `ApiError` (a body, a header, a route) and a
plugin's `PluginError`. Neither is a `DomainError`, and a `PluginError` is
no `ApiError`: a handler of the HTTP layer's errors never catches a plugin's.
Such an error says nothing more than its status, so the status says whether
it may pass (`MAY_PASS`), unless its raiser said otherwise.
"""

from __future__ import annotations

from typing import Any

from core import errors

API_PREFIX = "/api/v1/"

# The statuses that say "this may pass by itself" when a status is all an
# error says: a time limit, a site or a browser failing, a service down, an
# upstream's time-out.
MAY_PASS = frozenset({408, 502, 503, 504})


class StatusError(errors.Refusal):
    """A refusal that carries its status: `transient` when the status may pass,
    unless `transient` is given."""

    def __init__(self, status: int, message: str, page_id: str | None = None, *, transient: bool | None = None):
        super().__init__(message, page_id)
        self.status = status
        self.transient = status in MAY_PASS if transient is None else transient


class ApiError(StatusError):
    """The HTTP layer's refusal: its status and one sentence for the client."""

    def envelope(self) -> dict[str, Any]:
        return error_body(self.message, self.page_id)


# Each domain refusal's status; a subclass takes its nearest listed base's.
STATUS_OF: dict[type[errors.DomainError], int] = {
    errors.InvalidPageId: 400,
    errors.BadAction: 400,
    errors.InvalidSchedule: 400,
    errors.BadJobHeader: 400,
    errors.InvalidCredential: 400,
    errors.NavigationRefused: 403,
    errors.PageNotOpen: 404,
    errors.NoSuchJob: 404,
    errors.NoSuchAction: 404,
    errors.NoSuchSchedule: 404,
    errors.NoSuchCredential: 404,
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
    errors.CredentialIncomplete: 409,
    errors.KeyReused: 422,
    errors.LeaseRequired: 423,
    errors.QueueFull: 429,
    errors.Cancelled: 499,  # nginx's "client closed request", as the request log uses it
    errors.ActionFailed: 500,
    errors.CredentialUnreadable: 500,
    errors.TabLost: 502,
    errors.BrowserStepFailed: 502,
    errors.BrowserNotRunning: 503,
    errors.JobsFull: 503,
    errors.WaitersFull: 503,
    errors.Interrupted: 503,
    errors.ResultTooLarge: 507,
    errors.StoreFull: 507,
}


def status_of(error: errors.Refusal) -> int:
    """The status `error` is answered with: its own, or the table's."""
    if isinstance(error, StatusError):
        return error.status
    for kind in type(error).__mro__:
        status = STATUS_OF.get(kind)
        if status is not None:
            return status
    return 500


def refusal(error: errors.Refusal, page_id: str | None = None) -> ApiError:
    """`error` as the API answers it: its status, and the envelope naming its
    page (or `page_id` when it names none)."""
    return ApiError(status_of(error), error.message, error.page_id if error.page_id is not None else page_id)


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
