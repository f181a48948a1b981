"""`GET /api/v1/fleet/jobs`: the console's search of every persona's jobs, for
scripts, with the waker's key as `Authorization: Bearer` (a wrong one waits
for its refusal, as at the console's sign-in)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from console import auth
from console.auth import Visitor
from console.fleet import current_fleet
from console.search import SearchInvalid, searched
from core.api import json_response
from waker.api import REALM, WakerError, error_response


def refused(request: HttpRequest, status: int, message: str) -> HttpResponse:
    response = error_response(WakerError(status, message))
    if status == 401:
        response["WWW-Authenticate"] = REALM
    return response


@auth.console_page(lambda: current_fleet().key_guard, refused=refused, bearer_only=True)
async def fleet_jobs(request: HttpRequest, visitor: Visitor) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        response = error_response(WakerError(405, f"Method {request.method} is not allowed here; use GET."))
        response["Allow"] = "GET, HEAD"
        return response
    try:
        found = await searched(dict(request.GET.items()), current_fleet())
    except SearchInvalid as error:
        return error_response(WakerError(400, str(error)))
    return json_response({"success": True, "page_id": None, **found})
