"""The waker's answers: its key check, and its view wrapper around the
envelope.

The body parser, the JSON renderer and the envelope are the worker's own
(core/api.py), so a client parses both alike; what is the waker's is its
sentences, its realm and its key (WAKER_KEY), which are not the worker's.
"""

from __future__ import annotations

import functools
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from core.api import ApiError, json_bytes, status_of
from core.api import error_body as envelope_of
from core.api import error_response as worker_error_response
from core.wrong_keys import KeyFlood, WrongKeys, address_of
from waker.supervisor import current

log = logging.getLogger("penelope.waker")

REALM = 'Bearer realm="penelope-waker"'
WAKER_KEY_REQUIRED = "A valid key is required: send Authorization: Bearer <WAKER_KEY>."
WORKER_KEY_REQUIRED = "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>."


class WakerError(ApiError):
    """An answer of the waker's own API other than success: its status and
    one sentence for the client. No page is ever named (page_id is null)."""

    def __init__(self, status: int, message: str):
        super().__init__(status, message)


def error_body(message: str) -> dict[str, Any]:
    """The envelope of a waker's refusal (the proxy's raw ASGI answers)."""
    return envelope_of(message, None)


def encode(body: dict[str, Any]) -> bytes:
    """A body as the worker writes its answers (the proxy's raw ASGI answers)."""
    return json_bytes(body)


def error_response(error: ApiError) -> HttpResponse:
    return worker_error_response(error, realm=REALM)


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


def flooded(flood: KeyFlood) -> HttpResponse:
    """429 for an address whose wrong keys wait too many turns (core/wrong_keys.py)."""
    response = error_response(WakerError(status_of(flood), flood.message))
    response["Retry-After"] = str(flood.retry_after_s)
    return response


async def waker_key_refusal(request: HttpRequest, guard: WrongKeys) -> HttpResponse | None:
    """None when the request carries WAKER_KEY; else its 401, after a wrong
    key's turn (none for a request without a key), or a flood's 429."""
    authorization = request.headers.get("Authorization")
    if authorization is None:
        return error_response(WakerError(401, WAKER_KEY_REQUIRED))
    try:
        if await guard.check(address_of(request), lambda: bearer_matches(authorization, settings.WAKER_KEY)):
            return None
    except KeyFlood as flood:
        return flooded(flood)
    return error_response(WakerError(401, WAKER_KEY_REQUIRED))


View = Callable[..., Awaitable[HttpResponse]]


def waker_view(*methods: str, key_required: bool = True) -> Callable[[View], View]:
    """Wrap an async view of the waker's API: the WAKER_KEY (a wrong one
    waits its turn, core/wrong_keys.py), the methods, and every failure as
    the envelope. No traceback reaches the client."""

    allowed = {method.upper() for method in methods}

    def decorate(view: View) -> View:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if key_required and (refusal := await waker_key_refusal(request, current().key_guard)) is not None:
                return refusal
            if request.method not in allowed:
                response = error_response(
                    WakerError(405, f"Method {request.method} is not allowed here; use {', '.join(sorted(allowed))}.")
                )
                response["Allow"] = ", ".join(sorted(allowed))
                return response
            try:
                return await view(request, *args, **kwargs)
            except ApiError as error:  # the waker's own, and the body parser's
                return error_response(error)
            except Exception:
                log.exception("unexpected error in %s %s", request.method, request.path)
                return error_response(internal_error())

        return wrapper

    return decorate


def internal_error() -> WakerError:
    return WakerError(500, "The waker hit an unexpected error; the details are in its log.")
