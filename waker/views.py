"""The waker's API: the personas and their state, start, stop, workload, and metrics."""

from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework import serializers

from core.api import json_response, read_json_object
from waker import metrics as waker_metrics
from waker.api import WakerError, waker_view
from waker.persona_worker import PersonaWorker, WorkInFlight
from waker.process import StartFailed
from waker.supervisor import current


class StopParams(serializers.Serializer):
    force = serializers.BooleanField(default=False)


def find(name: str) -> PersonaWorker:
    worker = current().get(name)
    if worker is None:
        raise WakerError(404, f"No persona {name[:64]}.")
    return worker


def persona_response(worker: PersonaWorker) -> HttpResponse:
    return json_response({"success": True, "page_id": None, **worker.snapshot()})


def validated(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> dict[str, Any]:
    checked = serializer_class(data=data)
    if not checked.is_valid():
        field, messages = next(iter(checked.errors.items()))
        raise WakerError(400, f"Invalid parameter '{field}': {messages[0]}")
    return checked.validated_data


async def wake(worker: PersonaWorker) -> None:
    try:
        await worker.ensure_running()
    except StartFailed as error:
        raise WakerError(503, f"Persona {worker.persona.name}'s worker did not start: {error.message}") from None


@waker_view("GET", key_required=False)
async def health(request: HttpRequest) -> HttpResponse:
    return json_response({"success": True, "page_id": None, "status": "ok", "personas": len(current().workers)})


@waker_view("GET")
async def personas(request: HttpRequest) -> HttpResponse:
    return json_response(
        {"success": True, "page_id": None, "personas": [worker.snapshot() for worker in current().workers.values()]}
    )


@waker_view("GET")
async def persona(request: HttpRequest, name: str) -> HttpResponse:
    return persona_response(find(name))


@waker_view("POST")
async def start(request: HttpRequest, name: str) -> HttpResponse:
    worker = find(name)
    await wake(worker)
    return persona_response(worker)


@waker_view("POST")
async def stop(request: HttpRequest, name: str) -> HttpResponse:
    worker = find(name)
    params = validated(StopParams, read_json_object(request, server="waker"))
    try:
        await worker.stop(force=params["force"])
    except WorkInFlight as error:
        raise WakerError(409, error.message) from None
    return persona_response(worker)


@waker_view("GET")
async def workload(request: HttpRequest, name: str) -> HttpResponse:
    """The worker's own `GET /api/v1/workload`, with the persona's name. Like
    any request through the waker it starts a stopped worker; the read is not
    client activity, so a `sleepy` worker goes back to sleep after its timeout."""
    worker = find(name)
    await wake(worker)
    params = {"window_s": request.GET["window_s"]} if "window_s" in request.GET else {}
    with worker.forwarding():
        try:
            answer = await current().http.get(
                worker.persona.api_url + "/workload", params=params, headers=worker.auth_headers()
            )
            body = answer.json()
        except (httpx.HTTPError, ValueError) as error:
            raise WakerError(502, f"Persona {name}'s worker did not answer: {error.__class__.__name__}.") from None
    return json_response({**body, "persona": name}, status=answer.status_code)


@waker_view("GET", key_required=not settings.WAKER_METRICS_PUBLIC)
async def metrics(request: HttpRequest) -> HttpResponse:
    """The waker's metrics in the Prometheus text format: personas by state,
    wakes and their latency, stops and recycles."""
    body = waker_metrics.render(current().workers.values())
    return HttpResponse(body, content_type=waker_metrics.CONTENT_TYPE)
