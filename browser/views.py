"""Routes for pages and leases."""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework import serializers

from browser.pages import registry, validate_page_id
from browser.purge import purge_idle_pages
from penelope_site.api import ApiError, api_view, json_response, read_json_body
from plugins.framework import describe_errors


class OpenPageParams(serializers.Serializer):
    page_id = serializers.CharField(max_length=1000, trim_whitespace=False)

    def validate_page_id(self, page_id: str) -> str:
        if not isinstance(self.initial_data.get("page_id"), str):
            raise serializers.ValidationError("a page id is a string.")
        return page_id


class LeaseParams(serializers.Serializer):
    ttl = serializers.FloatField()

    def validate_ttl(self, ttl: float) -> float:
        if isinstance(self.initial_data.get("ttl"), bool):
            raise serializers.ValidationError("a lease's ttl is a number of seconds.")
        if not math.isfinite(ttl) or not 0 < ttl <= settings.MAX_TTL_S:
            raise serializers.ValidationError(f"a lease's ttl is more than 0 and at most {settings.MAX_TTL_S:g} seconds.")
        return ttl


def validated(serializer_class: type[serializers.Serializer], data: dict) -> dict:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise ApiError(400, describe_errors(serializer.errors))
    return serializer.validated_data


@api_view("GET", "POST")
async def pages(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return json_response(
            {"success": True, "page_id": None, "max_pages": settings.MAX_PAGES,
             "pages": [page.state() for page in registry.pages.values()]}
        )
    page_id = validated(OpenPageParams, read_json_body(request))["page_id"]
    page = await registry.open(page_id)
    return json_response({"success": True, **page.state()}, 201)


@api_view("GET", "DELETE")
async def page_detail(request: HttpRequest, page_id: str) -> HttpResponse:
    validate_page_id(page_id)
    page = registry.get(page_id)
    if request.method == "GET":
        return json_response({"success": True, **page.state()})
    await registry.close(page_id, request.headers.get("X-Lease"))
    return json_response({"success": True, "page_id": page_id, "closed": True})


@api_view("POST", "DELETE")
async def lease(request: HttpRequest, page_id: str) -> HttpResponse:
    lease_id = request.headers.get("X-Lease")
    if request.method == "POST":
        ttl = validated(LeaseParams, read_json_body(request))["ttl"]
        validate_page_id(page_id)
        taken = registry.get(page_id).take_lease(ttl, lease_id)
        renewed = bool(lease_id)  # the holder sent its own lease: same id, new TTL
        return json_response(
            {"success": True, "page_id": page_id, "lease": taken.id, "ttl": taken.ttl,
             "expires_in": round(taken.expires_in(time.monotonic()), 3)},
            200 if renewed else 201,
        )
    validate_page_id(page_id)
    registry.get(page_id).release_lease(lease_id)
    return json_response({"success": True, "page_id": page_id, "released": True})


@api_view("POST")
async def purge(request: HttpRequest) -> HttpResponse:
    """Free memory on every idle page now; the same as the `purge` loop."""
    if registry.browser is None:
        raise ApiError(503, "The browser is not running.")
    report = await purge_idle_pages()
    return json_response({"success": True, "page_id": None, **report.as_dict()})
