"""The API's JSON in and out, for the worker (core/rest.py) and the waker
(waker/api.py) alike: the body as a JSON object, the bytes of an answer,
and the error envelope `{"success": false, "error": ..., "page_id": ...}`.

The waker imports this module, so it imports no DRF view and reads no
worker setting (tests/test_waker.py checks what the waker loads).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from rest_framework.renderers import JSONRenderer

from core.api import ApiError
from core.auth import REALM

# JSON's whitespace (RFC 8259): what may surround a value, and all an empty body holds.
JSON_WHITESPACE = b" \t\n\r"


def read_json_object(request: HttpRequest, *, server: str = "worker") -> dict[str, Any]:
    """The request's body as a JSON object, whatever its Content-Type: empty
    (no bytes, or JSON's whitespace only: `-d $'\\n'` is no parameters) is
    `{}`, anything else that is not JSON 422, anything but an object 400, an
    object that names a key twice (at any depth) 400,
    past DATA_UPLOAD_MAX_MEMORY_SIZE 413 (the sentence names `server`,
    "worker" or "waker")."""
    try:
        # Django's `body` enforces the size limit, with or without a Content-Length.
        raw = request.body
    except RequestDataTooBig:
        raise ApiError(413, f"The request body is larger than the {server} accepts.") from None
    if not raw.strip(JSON_WHITESPACE):
        return {}
    try:
        data = json.loads(raw, object_pairs_hook=object_without_repeats)
    except RepeatedKey as repeated:
        raise ApiError(
            400, f"The request body names '{repeated.name[:64]}' twice in one object; send each key once."
        ) from None
    except (ValueError, RecursionError):
        raise ApiError(422, "The request body is not valid JSON.") from None
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
