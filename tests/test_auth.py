"""Every /api/v1 route but health refuses a missing or wrong key. The routes
come from the URL configuration, so a new route is covered automatically."""

from __future__ import annotations

import re

import pytest
from django.urls import get_resolver

from harness.worker import TEST_KEY

SAMPLE = {"page_id": "main", "family": "web", "action": "state", "name": "content", "token": "abc", "job_id": "0123456789abcdef",
          "schedule_id": "0123456789abcdef"}


def api_routes() -> list[str]:
    routes = []
    for pattern in get_resolver().url_patterns:
        route = str(getattr(pattern, "pattern", ""))
        if route.startswith("api/v1/") and route != "api/v1/health":
            routes.append("/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLE[m.group(1)], route))
    return routes


ROUTES = api_routes()
BAD_AUTH = [
    {},
    {"Authorization": "Bearer wrong-key"},
    {"Authorization": f"Bearer {TEST_KEY}x"},
    {"Authorization": f"Basic {TEST_KEY}"},
    {"Authorization": TEST_KEY},
    {"Authorization": "Bearer"},
]


def test_the_route_list_covers_the_api():
    assert len(ROUTES) >= 7
    assert "/api/v1/main/plugin/web/state" in ROUTES


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_route_refuses_missing_or_wrong_key(worker, path, method):
    import httpx

    with httpx.Client(base_url=worker.base_url) as client:
        for headers in BAD_AUTH:
            response = client.request(method, path, headers=headers)
            assert response.status_code == 401, (path, headers, response.text)
            body = response.json()
            assert body == {"success": False, "error": body["error"], "page_id": None}
            assert TEST_KEY not in response.text


def test_unknown_api_route_needs_the_key_then_answers_the_envelope(worker, api):
    import httpx

    assert httpx.get(worker.base_url + "/api/v1/main/nowhere").status_code == 401
    response = api.get("/main/nowhere")
    assert response.status_code == 404
    assert response.json()["success"] is False


def test_health_needs_no_key(worker):
    import httpx

    response = httpx.get(worker.base_url + "/api/v1/health")
    assert response.status_code == 200
    assert response.json()["success"] is True
