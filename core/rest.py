"""DRF as the API runs it.

Every `/api/v1` route is an `ApiView`: an adrf async `APIView` whose handlers
run on the worker's event loop, where the browser lives. Its dispatch keeps
the request path free of thread hops and of DRF's per-request extras the API
does not use (the `Allow` header on every answer): that part replaces adrf's
and DRF's own code, so it lives with the project's other framework seams
(core/seams/, `InlineDispatch`).

- Bodies go through `JsonObjectBody`, whatever the Content-Type says.
- Answers are rendered by the serializer that describes them in the OpenAPI
  document (`answer`), so the two cannot drift apart.
- Every failure, from any layer, becomes the envelope in `envelope_handler`,
  the project's one DRF exception handler: no view builds an error itself.

The body parser, the renderer and the envelope are core/api.py's,
which the waker uses too.
"""

from __future__ import annotations

import logging
from typing import Any

from adrf.views import APIView
from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from rest_framework import exceptions, serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer

from core.api import ApiError, error_response, internal_error, json_response, read_json_object, refusal
from core.auth import KEY_REQUIRED, BearerKey, HasKey, key_matches
from core.errors import Refusal
from core.runtime import runtime_of
from core.seams import InlineDispatch, django_request_of
from core.shapes import declared_fields, unknown_parameters
from core.wrong_keys import KeyFlood, address_of

log = logging.getLogger("penelope.api")

TOO_MANY_PARAMETERS = "The request has more than {} parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS)."
HANDLER_NAMES = ("get", "post", "put", "patch", "delete")


# --- requests ---------------------------------------------------------------------------


class JsonObjectBody(BaseParser):
    """The body as a JSON object, whatever the Content-Type (the contract does
    not check it): empty is `{}`, malformed JSON 422, anything but an object
    400, past DATA_UPLOAD_MAX_MEMORY_SIZE 413."""

    media_type = "application/json"  # what the schema says; FirstChoice picks it for any type

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> dict:
        return read_json_object(django_request_of(parser_context["request"]))


class FirstChoice(BaseContentNegotiation):
    """One parser and one renderer: the API speaks JSON whatever the request's
    Content-Type and Accept say."""

    def select_parser(self, request: Any, parsers: list) -> Any:
        return parsers[0]

    def select_renderer(self, request: Any, renderers: list, format_suffix: str | None = None) -> tuple:
        return renderers[0], renderers[0].media_type


def describe_errors(errors: Any, path: str = "") -> str:
    """A serializer's first error as one sentence for the client, naming the
    field by its path inside nested objects and lists (`wait_for.state`,
    `fields.title.selector`, `cookies.0.name`)."""
    field_name, messages = next(iter(errors.items()))
    message = messages[0] if isinstance(messages, list) and messages else messages
    name = path if field_name == "non_field_errors" else f"{path}.{field_name}" if path else str(field_name)
    if isinstance(message, dict):  # a nested serializer, or a list's or dict's items
        return describe_errors(message, name)
    if not name:
        return f"Invalid parameters: {message}"
    return f"Invalid parameter '{name}': {message}"


def validated(shape: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """`data` checked by the serializer `shape`: its validated data, or 400."""
    serializer = shape(data=data)
    if not serializer.is_valid():
        raise ApiError(400, describe_errors(serializer.errors))
    return serializer.validated_data


def known_only(shape: type[serializers.Serializer] | None, data: Any, does: str) -> Any:
    """`data`, when it names only fields the serializer `shape` declares (None:
    the route takes no body); else 400 naming them, as an action refuses what
    it does not declare (plugins/declared.py). DRF drops an undeclared field
    without a word: `{"tll": 60}` would be a lease of the default."""
    if not isinstance(data, dict):
        return data
    declared = list(declared_fields(shape)) if shape is not None else []
    unknown = [str(name) for name in data if name not in declared]
    if not unknown:
        return data
    raise ApiError(400, unknown_parameters(unknown, where=does, offer=declared))


# --- answers ------------------------------------------------------------------------------

# One instance per shape: a serializer's fields are built once, not per answer.
_shapes: dict[type[serializers.BaseSerializer], serializers.BaseSerializer] = {}


def represent(shape: type[serializers.BaseSerializer], data: Any) -> dict[str, Any]:
    """`data` as the serializer `shape` shows it."""
    serializer = _shapes.get(shape)
    if serializer is None:
        serializer = _shapes.setdefault(shape, shape())
    return serializer.to_representation(data)


def answer(shape: type[serializers.BaseSerializer], data: Any, status: int = 200) -> HttpResponse:
    """The response for `data`, rendered by the serializer that describes it."""
    return json_response(represent(shape, data), status)


# --- the exception handler ----------------------------------------------------------------


def envelope_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse:
    """DRF's EXCEPTION_HANDLER: every failure of every view as the envelope.
    No traceback reaches the client; an unexpected one goes to the log."""
    page_id = (context.get("kwargs") or {}).get("page_id")
    allow = None
    if isinstance(exc, Refusal):
        error = refusal(exc, page_id)
    elif isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        error = ApiError(401, KEY_REQUIRED)
    elif isinstance(exc, exceptions.MethodNotAllowed):
        allow = ", ".join(sorted(context["view"].allowed_methods))
        error = ApiError(405, f"Method {context['request'].method} is not allowed here; use {allow}.", page_id)
    elif isinstance(exc, TooManyFieldsSent):  # raised by the first read of the query string
        error = ApiError(400, TOO_MANY_PARAMETERS.format(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS), page_id)
    elif isinstance(exc, Http404):
        error = ApiError(404, "Not found.", page_id)
    elif isinstance(exc, exceptions.APIException):
        error = ApiError(exc.status_code, str(exc.detail), page_id)
    else:
        request = context.get("request")
        log.exception("unexpected error in %s %s", getattr(request, "method", "?"), getattr(request, "path", "?"), exc_info=exc)
        error = internal_error(page_id)
    response = error_response(error)
    if allow is not None:
        response["Allow"] = allow
    if isinstance(exc, Refusal) and exc.retry_after_s is not None:  # a full queue's, a flood of wrong keys'
        response["Retry-After"] = str(exc.retry_after_s)
    return response


# --- the views' base ------------------------------------------------------------------------


class ApiView(InlineDispatch, APIView):
    # The base of every `/api/v1` view: bearer key, JSON in and out, the
    # envelope for every error. A subclass defines async `get`, `post`, ...;
    # those are its methods, and any other answers 405 with `Allow`. (A
    # comment, not a docstring: the schema would take it for every
    # operation's description.)

    authentication_classes = (BearerKey,)
    permission_classes = (HasKey,)
    parser_classes = (JsonObjectBody,)
    renderer_classes = (JSONRenderer,)
    content_negotiation_class = FirstChoice
    throttle_classes = ()
    # What Django's clickjacking middleware set when it ran on the API.
    response_headers = {"X-Frame-Options": "DENY"}
    # What a request of each method that acts does, in a few words
    # ({"POST": "creating a schedule"}): a read key's 403 names it (core/auth.py).
    does: dict[str, str] = {}

    def what_it_does(self, request: Any) -> str | None:
        return self.does.get(request.method)

    async def async_dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # A key that matches none waits its turn before its 401, which DRF's
        # authentication then answers as ever (core/wrong_keys.py); an
        # address whose wrong keys wait too many turns gets 429, the key not
        # compared. A request without a key guessed nothing and waits for
        # nothing, nor does a route that takes no key (health, public metrics).
        if "HTTP_AUTHORIZATION" in request.META and HasKey in self.permission_classes:
            try:
                await runtime_of(request).wrong_keys.check(address_of(request), lambda: key_matches(request))
            except KeyFlood as flood:
                response = envelope_handler(flood, {})
                for name, value in self.response_headers.items():
                    response[name] = value
                return response
        return await super().async_dispatch(request, *args, **kwargs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "http_method_names" not in cls.__dict__:
            # Only the methods it handles: HEAD and OPTIONS answer 405 like any other.
            cls.http_method_names = [name for name in HANDLER_NAMES if getattr(cls, name, None) is not None]


class NoRoute(ApiView):
    # Any other path under /api/v1: 404 in the envelope, once the key is
    # checked (a client without it learns nothing of the routes).

    schema = None  # not an operation of the API
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options", "trace"]

    async def get(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        raise ApiError(404, f"No route {request.path[:200]}.")

    post = put = patch = delete = head = options = trace = get
    http_method_not_allowed = get  # a method Django does not name: still no route
