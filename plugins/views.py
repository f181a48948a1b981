"""The plugin and primitive routes.

Checks run in the contract's order: key (middleware) → headers and parameters
400 (malformed JSON 422) → page 404 → plugin 404 → lease 423 → busy 409.
Jobs plug in through `job_hook`, set by the jobs app: this module knows
nothing of them.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from browser.pages import ManagedPage, registry, validate_page_id
from penelope_site.api import ApiError, api_view, json_response, read_json_body
from plugins.calls import run_plain
from plugins.framework import Action, find_action
from plugins.primitives import primitives


class JobHook(Protocol):
    def options(self, request: HttpRequest) -> Any | None:
        """The job options the request's headers ask for (None: a plain call); 400 if bad."""

    async def submit(
        self, *, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None, options: Any
    ) -> HttpResponse:
        """Claim the page for a job and answer 202."""


job_hook: JobHook | None = None

JOB_HEADERS = ("X-Callback-Url", "X-Result-Ttl")


def call_parameters(request: HttpRequest) -> dict[str, Any]:
    if request.method == "GET":
        return {key: request.GET[key] for key in request.GET}
    return read_json_body(request)


@api_view("GET", "POST")
async def plugin_call(request: HttpRequest, page_id: str, family: str, action: str) -> HttpResponse:
    data = call_parameters(request)
    job_options = job_hook.options(request) if job_hook else None
    validate_page_id(page_id)
    found = find_action(family, action)
    params = found.validate(data) if found else {}
    page = registry.get(page_id)
    if found is None:
        raise ApiError(404, f"No plugin action {family[:64]}/{action[:64]}.", page_id)
    lease_id = request.headers.get("X-Lease")
    if job_options is not None:
        return await job_hook.submit(page=page, action=found, params=params, lease_id=lease_id, options=job_options)
    claim = await page.acquire(lease_id, settings.PAGE_WAIT_S)
    outcome = await run_plain(claim, found, params)
    return json_response(outcome.body, outcome.status)


@api_view("POST")
async def primitive_call(request: HttpRequest, page_id: str, name: str) -> HttpResponse:
    data = read_json_body(request)
    if any(header in request.headers for header in JOB_HEADERS):
        raise ApiError(400, "Primitives are synchronous: X-Callback-Url and X-Result-Ttl apply to plugin routes only.")
    validate_page_id(page_id)
    found = primitives.actions.get(name)
    params = found.validate(data) if found else {}
    page = registry.get(page_id)
    if found is None:
        raise ApiError(404, f"No primitive {name[:64]}; there are {', '.join(sorted(primitives.actions))}.", page_id)
    claim = await page.acquire(request.headers.get("X-Lease"), settings.PAGE_WAIT_S)
    outcome = await run_plain(claim, found, params)
    return json_response(outcome.body, outcome.status)
