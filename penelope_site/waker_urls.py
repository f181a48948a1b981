"""The waker's routes: its own API (waker/urls.py), the fleet console under
/console/ and the console's search for scripts. `/w/{persona}/...` is not
here: the proxy in front of Django forwards it (waker/proxy.py)."""

from __future__ import annotations

from django.urls import include, path

from console.api import fleet_jobs
from waker import urls as waker_urls

urlpatterns = [
    path("api/v1/fleet/jobs", fleet_jobs, name="waker-fleet-jobs"),
    *waker_urls.urlpatterns,
    path("console/", include("console.urls")),
]

handler404 = waker_urls.handler404
handler500 = waker_urls.handler500
