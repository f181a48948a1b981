"""The demo site's routes, included under /demo/ by penelope_site/urls.py.

Handles are validated in the views (a bad one is a not-found page), so the
routes take any path segment.
"""

from __future__ import annotations

from django.urls import path

from demo_site import views

app_name = "demo"

urlpatterns = [
    path("", views.index, name="index"),
    path("<str:handle>/", views.profile, name="profile"),
    path("<str:handle>/following/", views.following_page, name="following"),
    path("<str:handle>/following.json", views.following_json, name="following-json"),
]
