"""The refusals: what the worker answers instead of success, in the domain's words.

`Refusal` is the one base: one sentence for whoever asked (`message`), the
page it concerns, and whether it may pass by itself (`transient`: a time
limit, a browser or a service down). `transient` is all a retry asks
(jobs/options.py); the status it becomes is chosen only at the edge. Code
that turns a refusal into an answer catches `Refusal`, whatever raised it.

Two kinds of refusal:

- `DomainError`, below: the page model, the job core, the plugin framework
  and the schedules raise what happened; none of them knows HTTP. A class
  is what it is; `core.api.STATUS_OF` is the one table that gives each its
  status and the envelope (for the API's exception handler, and for a plain
  call's or a job's stored answer).
- `core.api.StatusError`: a refusal whose status *is* its meaning, as its
  raiser picked it. The HTTP layer's `ApiError` (a bad body, no route) and a
  plugin's `PluginError` (its author's `404` or `503`) are the two.
"""

from __future__ import annotations


class Refusal(Exception):
    """Something was refused: `message` says what, to the client."""

    # May pass by itself: an attempt of a job with X-Retry is worth another.
    transient: bool = False
    # When to come back, in whole seconds, when the refusal knows: the
    # answer's Retry-After (core/rest.py's handler sets it for any refusal).
    retry_after_s: int | None = None

    def __init__(self, message: str, page_id: str | None = None):
        super().__init__(message)
        self.message = message
        self.page_id = page_id


class DomainError(Refusal):
    """A rule of the domain refused what was asked; its class says which."""


# --- the browser and its pages ----------------------------------------------------


class InvalidPageId(DomainError):
    """A page id that is malformed, or a word the API's routes use."""


class PageNotOpen(DomainError):
    """No page of that name is open (or it was closed while a caller waited)."""


class PageAlreadyOpen(DomainError):
    pass


class TooManyPages(DomainError):
    """MAX_PAGES are open."""


class PageStaysOpen(DomainError):
    """Page main cannot be closed."""


class PageBusy(DomainError):
    """A call or a job holds the page, and the caller would not (or could not) wait."""


class LeaseRequired(DomainError):
    """The page is leased to another flow, or the lease sent is not its lease."""


class BrowserNotRunning(DomainError):
    """The browser is down (being launched again, or failed for good)."""

    transient = True


class TabLost(DomainError):
    """The page's tab could not be opened, or went during the call."""

    transient = True


class NavigationRefused(DomainError):
    """BROWSER_REFUSE_PRIVATE refused a navigation of the page during the call."""


# --- plugin actions -----------------------------------------------------------------


class BadAction(DomainError):
    """The action's input is the caller's mistake (e.g. a selector the browser cannot parse)."""


class ActionTimedOut(DomainError):
    """The action ran past its time limit, or a browser step timed out."""

    transient = True


class BrowserStepFailed(DomainError):
    """A browser step of the action failed (not the caller's fault)."""

    transient = True


class NoSuchAction(DomainError):
    """No plugin action of that name is loaded (a re-run of a job whose family is gone)."""


class ActionFailed(DomainError):
    """The action raised, or answered something that is no result."""


class ResultTooLarge(DomainError):
    """The action's result is past RESULT_MAX_BYTES."""


class StoreFull(DomainError):
    """The media store has no room for a file (MEDIA_MAX_MB)."""


# --- keys -------------------------------------------------------------------------------


class KeyFlood(DomainError):
    """Too many wrong keys from one address wait for their refusal
    (core/wrong_keys.py): the key is not compared, and `retry_after_s` says
    when a turn frees up."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(
            f"Too many wrong keys from this address are waiting for their refusal; try again in {retry_after_s} s "
            f"(KEY_REFUSAL_QUEUE)."
        )
        self.retry_after_s = retry_after_s


# --- jobs -------------------------------------------------------------------------------


class JobsFull(DomainError):
    """MAX_JOBS are held; `retry_after_s` estimates when there is room."""

    transient = True

    def __init__(self, message: str, page_id: str | None = None, *, retry_after_s: int = 1):
        super().__init__(message, page_id)
        self.retry_after_s = retry_after_s


class WaitersFull(DomainError):
    """MAX_WAITERS long-polls are waiting."""

    transient = True


class NoSuchJob(DomainError):
    pass


class JobNotCancellable(DomainError):
    """The job has ended, or it runs on another worker."""


class JobStillRunning(DomainError):
    """A running job cannot be forgotten."""


class QueueFull(DomainError):
    """QUEUE_MAX jobs wait for the page already; `retry_after_s` estimates when there is room."""

    def __init__(self, message: str, page_id: str | None = None, *, retry_after_s: int = 1):
        super().__init__(message, page_id)
        self.retry_after_s = retry_after_s


class QueueTimedOut(DomainError):
    """A queued job's wait for its page ran out (X-Queue-Timeout)."""


class BadJobHeader(DomainError):
    """A job header (`X-Result-Ttl`, `X-Retry`, …) that is malformed, doubled, or
    sent without the others it needs; `header` names it."""

    def __init__(self, header: str, message: str):
        super().__init__(message)
        self.header = header


class KeyInFlight(DomainError):
    """A start with the same Idempotency-Key is being stored now."""


class KeyReused(DomainError):
    """An Idempotency-Key sent again with a different request."""


class Interrupted(DomainError):
    """The worker stopped before the job ended."""

    transient = True


class Cancelled(DomainError):
    """A client cancelled the job."""


# --- schedules ---------------------------------------------------------------------------


class InvalidSchedule(DomainError):
    """A schedule's field is not valid; `field` names it (the API's 400, the admin form's error)."""

    def __init__(self, field: str, why: str, message: str | None = None):
        super().__init__(message or f"Invalid parameter '{field}': {why}")
        self.field = field
        self.why = why


class NoSuchSchedule(DomainError):
    pass


class ScheduleNameTaken(DomainError):
    """Another schedule has this name."""


class TooManySchedules(DomainError):
    """SCHEDULES_MAX schedules are stored."""


class ScheduleOverlap(DomainError):
    """A trigger found the schedule's previous job still queued or running, and its overlap is `skip`."""


# --- credentials -------------------------------------------------------------------------


class InvalidCredential(DomainError):
    """A credential's field is not valid; `field` names it. The sentence
    never holds a value sent: it may be a secret."""

    def __init__(self, field: str, why: str, message: str | None = None):
        super().__init__(message or f"Invalid parameter '{field}': {why}")
        self.field = field
        self.why = why


class NoSuchCredential(DomainError):
    pass


class CredentialIncomplete(DomainError):
    """The credential has no secret of the kind asked for (no TOTP secret, no password)."""


class CredentialUnreadable(DomainError):
    """A credential's sealed secrets do not open with the keys this worker has
    (another CREDENTIALS_KEY, a lost key file, or a seal moved from another row)."""
