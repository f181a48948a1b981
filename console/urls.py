"""The console's pages, under /console/ on the waker (penelope_site/waker_urls.py)."""

from __future__ import annotations

from django.urls import path

from console import views

urlpatterns = [
    path("", views.fleet_page, name="console-fleet"),
    path("sign-in", views.sign_in, name="console-sign-in"),
    path("sign-out", views.sign_out, name="console-sign-out"),
    path("jobs", views.jobs_page, name="console-jobs"),
    path("p/<str:name>/", views.persona_page, name="console-persona"),
    path("p/<str:name>/metrics", views.persona_metrics, name="console-metrics"),
    path("p/<str:name>/act", views.act, name="console-act"),
    path("static/<str:name>", views.static, name="console-static"),
]
