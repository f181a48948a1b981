"""The waker's own API. `/w/{persona}/...` is not here: the proxy in front
of Django forwards it (waker/proxy.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from waker import views
from waker.api import WakerError, error_response, internal_error

api = "api/v1/"

urlpatterns = [
    path(api + "health", views.health, name="waker-health"),
    path(api + "personas", views.personas, name="waker-personas"),
    path(api + "personas/<str:name>", views.persona, name="waker-persona"),
    path(api + "personas/<str:name>/start", views.start, name="waker-start"),
    path(api + "personas/<str:name>/stop", views.stop, name="waker-stop"),
    path(api + "personas/<str:name>/workload", views.workload, name="waker-workload"),
    path(api + "metrics", views.metrics, name="waker-metrics"),
]


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return error_response(WakerError(404, f"No route {request.path[:200]}."))


def server_error(request: HttpRequest) -> HttpResponse:
    return error_response(internal_error())


handler404 = not_found
handler500 = server_error
