"""The routes of the console run on its own (`manage.py console`): its pages
under /console/ and its search for scripts, and nothing of the waker's API
(there is no waker, so no `/w/{persona}/...` either)."""

from __future__ import annotations

from django.urls import include, path

from console.api import fleet_jobs
from waker import urls as waker_urls

urlpatterns = [
    path("api/v1/fleet/jobs", fleet_jobs, name="console-fleet-jobs"),
    path("console/", include("console.urls")),
]

handler404 = waker_urls.handler404
handler500 = waker_urls.handler500
