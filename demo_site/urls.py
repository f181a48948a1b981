"""The demo site's routes, included under /demo/ by penelope_site/urls.py.

Handles are validated in the views (a bad one is a not-found page), so the
routes take any path segment.
"""

from __future__ import annotations

from django.urls import path

from demo_site import sign_in, views

app_name = "demo"

urlpatterns = [
    path("", views.index, name="index"),
    # Words with a hyphen, which no handle has: the sign-in and its checkpoint.
    path("sign-in/", sign_in.sign_in, name="sign-in"),
    path("sign-in/password/", sign_in.password_sign_in, name="password-sign-in"),
    path("check-point/<str:handle>/", sign_in.check_point, name="check-point"),
    path("mail-inbox/<str:handle>/", sign_in.mail_inbox, name="mail-inbox"),
    path("signed-in/", sign_in.signed_in, name="signed-in"),
    path("<str:handle>/", views.profile, name="profile"),
    path("<str:handle>/following/", views.following_page, name="following"),
    path("<str:handle>/following.json", views.following_json, name="following-json"),
    path("<str:handle>/following.csv", views.following_csv, name="following-csv"),
    path("<str:handle>/photo/", views.photo, name="photo"),
]
