"""The API's gate: the bearer key, client activity and requests in flight."""

from __future__ import annotations

import hmac

from asgiref.sync import markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse

from activity.tracker import tracker
from penelope_site.api import API_PREFIX, ApiError, error_response

HEALTH_PATH = API_PREFIX + "health"
ACTIVITY_PATH = API_PREFIX + "activity"


def authorized(request: HttpRequest) -> bool:
    """Constant-time check of `Authorization: Bearer <key>`."""
    key = settings.PENELOPE_KEY
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if not key or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), key.encode())


class ApiGateMiddleware:
    async_capable = True
    sync_capable = False

    def __init__(self, get_response):
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if not path.startswith(API_PREFIX) or path == HEALTH_PATH:
            return await self.get_response(request)
        if not authorized(request):
            return error_response(ApiError(401, "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>."))
        # The waker reads activity every few seconds; counting that would keep
        # a sleepy worker awake forever.
        if path == ACTIVITY_PATH:
            return await self.get_response(request)
        tracker.touch()
        tracker.requests_in_flight += 1
        try:
            return await self.get_response(request)
        finally:
            tracker.requests_in_flight -= 1
            tracker.touch()
