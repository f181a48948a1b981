"""Seams in DRF and adrf: DRF's request stream (piece 3), adrf's dispatch
(4) and the Django request under DRF's (10). core/seams/__init__.py says
what each replaces or relies on, and why.

Imports no DRF views (and with them Django's admin): the waker imports
this package for its bounded requests."""

from __future__ import annotations

from typing import Any

from adrf.requests import AsyncRequest
from django.http import HttpRequest, HttpResponseBase

# --- 3. and 4. DRF's request, adrf's dispatch --------------------------------------------


class WholeBodyRequest(AsyncRequest):
    def _load_stream(self) -> None:
        # The Django request is the stream, whatever the Content-Length says:
        # a parser reads its `body`, which enforces the size limit.
        self._stream = self._request


class InlineDispatch:
    """Put before adrf's `APIView` in a view's bases: the view is dispatched
    without a thread hop and without DRF's `finalize_response`, and its
    requests are `WholeBodyRequest`s. `response_headers` are set on every
    answer that does not set them itself (in place of
    `default_response_headers`). Every handler must be async, and DRF's
    `initial()` must not wait on anything: it runs on the event loop, which
    is sound while authentication, permissions and throttles read only
    headers and settings (core/auth.py's do; the API has no throttles).

    A mixin, not a subclass of adrf's view, so that importing this module
    does not import DRF's views (and with them Django's admin): the waker
    imports it for its bounded requests."""

    response_headers: dict[str, str] = {}

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        # adrf's asks `view_is_async` each time, which inspects every handler.
        return self.async_dispatch(request, *args, **kwargs)

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> WholeBodyRequest:
        parts = type(self).__dict__.get("_request_parts")
        if parts is None:  # made once per view class: DRF's parsers, authenticators and negotiator hold no state
            parts = (self.get_parsers(), self.get_authenticators(), self.get_content_negotiator())
            type(self)._request_parts = parts
        parsers, authenticators, negotiator = parts
        return WholeBodyRequest(
            request,
            parsers=parsers,
            authenticators=authenticators,
            negotiator=negotiator,
            parser_context=self.get_parser_context(request),
        )

    async def async_dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        self.args, self.kwargs = args, kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = {}
        try:
            self.initial(request, *args, **kwargs)
            method = request.method.lower()
            handler = getattr(self, method) if method in self.http_method_names else self.http_method_not_allowed
            response = await handler(request, *args, **kwargs)
        except Exception as exc:
            response = self.handle_exception(exc)
        for name, value in self.response_headers.items():
            if name not in response:
                response[name] = value
        self.response = response
        return response


# --- 10. the Django request under DRF's -----------------------------------------------------


def django_request_of(request: Any) -> HttpRequest:
    """The Django `HttpRequest` a DRF `Request` wraps (DRF keeps it in
    `_request`): what a parser reads the body from, and where a value cached
    for the whole request goes (DRF's request passes reads on to it, but
    keeps what is set on it for itself)."""
    return request._request
