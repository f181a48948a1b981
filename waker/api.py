"""The waker's answers: its key check and the error envelope.

The envelope is the worker's (`{"success": false, "error": ..., "page_id":
null}`), so a client parses both alike, but the code is the waker's own: the
waker imports nothing of the worker's (docs/reference/WAKER_API.md), and its
sentences, realm and key are not the worker's.
"""

from __future__ import annotations

import functools
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse

log = logging.getLogger("penelope.waker")

WORKER_KEY_REQUIRED = "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>."


class WakerError(Exception):
    """An answer other than success: its status and one sentence for the client."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(message: str) -> dict[str, Any]:
    return {"success": False, "error": message, "page_id": None}


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def json_response(body: dict[str, Any], status: int = 200) -> HttpResponse:
    return HttpResponse(encode(body), status=status, content_type="application/json")


def error_response(error: WakerError, realm: str = "penelope-waker") -> HttpResponse:
    response = json_response(error_body(error.message), error.status)
    if error.status == 401:
        response["WWW-Authenticate"] = f'Bearer realm="{realm}"'
    return response


def any_key_matches(authorization: str, keys: list[str]) -> bool:
    """`bearer_matches` for any of `keys`, each compared in constant time."""
    matched = False
    for key in keys:
        matched |= bearer_matches(authorization, key)
    return matched


def bearer_matches(authorization: str, key: str) -> bool:
    """Constant-time check of an `Authorization: Bearer <key>` header."""
    scheme, _, given = authorization.partition(" ")
    if not key or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), key.encode())


View = Callable[..., Awaitable[HttpResponse]]


def waker_view(*methods: str, key_required: bool = True) -> Callable[[View], View]:
    """Wrap an async view of the waker's API: the WAKER_KEY, the methods, and
    every failure as the envelope. No traceback reaches the client."""

    allowed = {method.upper() for method in methods}

    def decorate(view: View) -> View:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if key_required and not bearer_matches(request.headers.get("Authorization", ""), settings.WAKER_KEY):
                return error_response(
                    WakerError(401, "A valid key is required: send Authorization: Bearer <WAKER_KEY>.")
                )
            if request.method not in allowed:
                response = error_response(
                    WakerError(405, f"Method {request.method} is not allowed here; use {', '.join(sorted(allowed))}.")
                )
                response["Allow"] = ", ".join(sorted(allowed))
                return response
            try:
                return await view(request, *args, **kwargs)
            except WakerError as error:
                return error_response(error)
            except Exception:
                log.exception("unexpected error in %s %s", request.method, request.path)
                return error_response(internal_error())

        return wrapper

    return decorate


def internal_error() -> WakerError:
    return WakerError(500, "The waker hit an unexpected error; the details are in its log.")


def read_json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object body: empty is `{}`, malformed JSON 422, anything but an object 400."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise WakerError(413, "The request body is larger than the waker accepts.") from None
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise WakerError(422, "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise WakerError(400, "The request body must be a JSON object.")
    return data
