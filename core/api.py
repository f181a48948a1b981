"""The API's answers: the error type every layer raises and the one place that
turns it (or any unexpected exception) into the error envelope."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse

log = logging.getLogger("penelope.api")

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


def error_body(message: str, page_id: str | None) -> dict[str, Any]:
    return {"success": False, "error": message, "page_id": page_id}


def json_response(body: dict[str, Any], status: int = 200) -> HttpResponse:
    # allow_nan=False: NaN and Infinity are not JSON; such a value raises here
    # (a 500 with the envelope) instead of going out as a body no client parses.
    return HttpResponse(
        json.dumps(body, separators=(",", ":"), allow_nan=False),
        status=status,
        content_type="application/json",
    )


def error_response(error: ApiError) -> HttpResponse:
    response = json_response(error.envelope(), error.status)
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="penelope"'
    return response


def internal_error(page_id: str | None = None) -> ApiError:
    return ApiError(500, "The worker hit an unexpected error; the details are in its log.", page_id)


View = Callable[..., Awaitable[HttpResponse]]

TOO_MANY_PARAMETERS = "The request has more than {} parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS)."


def api_view(*methods: str) -> Callable[[View], View]:
    """Wrap an async view: refuse other methods and answer every failure with
    the envelope. No traceback ever reaches the client; it goes to the log."""

    allowed = {m.upper() for m in methods}

    def decorate(view: View) -> View:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            page_id = kwargs.get("page_id")
            if request.method not in allowed:
                response = error_response(
                    ApiError(405, f"Method {request.method} is not allowed here; use {', '.join(sorted(allowed))}.", page_id)
                )
                response["Allow"] = ", ".join(sorted(allowed))
                return response
            try:
                return await view(request, *args, **kwargs)
            except ApiError as error:
                if error.page_id is None:
                    error.page_id = page_id
                return error_response(error)
            except TooManyFieldsSent:  # raised by the first read of request.GET
                return error_response(ApiError(400, TOO_MANY_PARAMETERS.format(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS), page_id))
            except Exception:
                log.exception("unexpected error in %s %s", request.method, request.path)
                return error_response(internal_error(page_id))

        wrapper.csrf_exempt = True  # bearer-key API: no cookies, no CSRF
        # What the OpenAPI description checks its operations against.
        wrapper.allowed_methods = frozenset(allowed)
        return wrapper

    return decorate


def read_json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object body: an empty body is `{}`, malformed JSON 422,
    anything but an object 400."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise ApiError(413, "The request body is larger than the worker accepts.") from None
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ApiError(422, "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return data
