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

The API's JSON in and out is here too, for the worker (core/rest.py) and
the waker (waker/api.py) alike: the body as a JSON object
(`read_json_object`), the bytes of an answer (`json_bytes`), and the error
envelope `{"success": false, "error": ..., "page_id": ...}`
(`error_response`). The waker imports this module, so it imports no DRF
view, no database thread and reads no worker setting (tests/test_waker.py
checks what the waker loads).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from rest_framework.renderers import JSONRenderer

from core import errors

API_PREFIX = "/api/v1/"
# What a 401 names in WWW-Authenticate: the worker's keys.
REALM = 'Bearer realm="penelope"'

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
    errors.KeyFlood: 429,
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


# --- the JSON in and out ------------------------------------------------------------------

# JSON's whitespace (RFC 8259): what may surround a value, and all an empty body holds.
JSON_WHITESPACE = b" \t\n\r"
# Byte order marks, longest first (UTF-32's little-endian one opens with UTF-16's).
BYTE_ORDER_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xef\xbb\xbf", "UTF-8"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)  # fmt: skip


def not_utf8(raw: bytes) -> str | None:
    """Why a body is refused for its encoding, or None. JSON exchanged between
    systems is UTF-8 without a byte order mark (RFC 8259, 8.1), but Python's
    `json.loads` takes bytes in UTF-16 and UTF-32 too, and skips a BOM: a
    body another reader would take for something else, or refuse, ran.
    UTF-16 and UTF-32 are told by their BOM, or without one by a NUL among
    the first four bytes (RFC 4627's way: JSON text opens with two ASCII
    characters, and UTF-8 JSON has no raw NUL anywhere)."""
    for mark, encoding in BYTE_ORDER_MARKS:
        if raw.startswith(mark):
            return (
                f"The request body starts with a {encoding} byte order mark; send JSON as UTF-8 without one (RFC 8259)."
            )
    if b"\x00" in raw[:4]:
        return "The request body is UTF-16 or UTF-32; send JSON as UTF-8 (RFC 8259)."
    return None


def read_json_object(request: HttpRequest, *, server: str = "worker") -> dict[str, Any]:
    """The request's body as a JSON object, whatever its Content-Type: empty
    (no bytes, or JSON's whitespace only: `-d $'\\n'` is no parameters) is
    `{}`, anything else that is not JSON 422 (bytes that are not UTF-8
    too), JSON in UTF-16 or UTF-32 or with a byte order mark 400 (JSON is
    UTF-8), anything but an object 400, an object that names a key twice (at
    any depth) 400,
    past DATA_UPLOAD_MAX_MEMORY_SIZE 413 (the sentence names `server`,
    "worker" or "waker")."""
    try:
        # Django's `body` enforces the size limit, with or without a Content-Length.
        raw = request.body
    except RequestDataTooBig:
        raise ApiError(413, f"The request body is larger than the {server} accepts.") from None
    if not raw.strip(JSON_WHITESPACE):
        return {}
    # Decoded here, as UTF-8 alone: given bytes, `json.loads` guesses the
    # encoding. A body in another is read that way only to tell JSON sent
    # in the wrong encoding (400, below) from a body that is no JSON at all,
    # which answers 422 as any malformed body does.
    refused = not_utf8(raw)
    try:
        data = json.loads(raw.decode("utf-8") if refused is None else raw, object_pairs_hook=object_without_repeats)
    except RepeatedKey as repeated:
        raise ApiError(
            400, f"The request body names '{repeated.name[:64]}' twice in one object; send each key once."
        ) from None
    except (ValueError, RecursionError):
        raise ApiError(422, "The request body is not valid JSON.") from None
    if refused is not None:
        raise ApiError(400, refused)
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return data


class RepeatedKey(Exception):  # noqa: N818 - not an error of the code, a request's fault
    """A JSON object of the body names a key twice: JSON's parser keeps the
    last value without a word, so `{"handle": "ghost", "handle": "alice"}`
    would run as alice."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def object_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`' object_pairs_hook: the object, or RepeatedKey."""
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise RepeatedKey(name)
            seen.add(name)
    return made


class AnswerJson(JSONRenderer):
    """DRF's JSON renderer as every answer has always been written: compact;
    strict, so NaN and Infinity (not JSON) raise here, a 500 with the
    envelope, instead of going out as a body no client parses; non-ASCII
    escaped. Fixed here rather than read from REST_FRAMEWORK, so the waker,
    which has no DRF settings, writes the same bytes."""

    compact = True
    strict = True
    ensure_ascii = True


_renderer = AnswerJson()


def json_bytes(body: dict[str, Any]) -> bytes:
    """`body` as the bytes of an answer."""
    return _renderer.render(body)


def json_response(body: dict[str, Any], status: int = 200) -> HttpResponse:
    content = json_bytes(body)
    response = HttpResponse(content, status=status, content_type="application/json")
    response["Content-Length"] = str(len(content))
    return response


def error_response(error: ApiError, realm: str = REALM) -> HttpResponse:
    """The envelope for `error` (as `core.shapes.ErrorEnvelope` describes it:
    tests/test_envelope.py holds the two together); a 401 names `realm` in
    WWW-Authenticate."""
    response = json_response(error.envelope(), error.status)
    if error.status == 401:
        response["WWW-Authenticate"] = realm
    return response
