"""Routes. Everything under /api/v1 answers with the envelope, errors included."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from activity import views as activity_views
from browser import views as browser_views
from core import schema
from core.api import API_PREFIX, ApiError, error_response, internal_error
from jobs import views as job_views
from media_store import views as media_views
from plugins import views as plugin_views

api = "api/v1/"

urlpatterns = [
    path(api + "health", activity_views.health, name="health"),
    path(api + "activity", activity_views.activity, name="activity"),
    path(api + "workload", activity_views.workload, name="workload"),
    path(api + "purge", browser_views.purge, name="purge"),
    path(api + "schema", schema.schema, name="schema"),
    path(api + "pages", browser_views.pages, name="pages"),
    path(api + "media/<str:token>", media_views.download, name="media"),
    path(api + "jobs/<str:job_id>", job_views.poll, name="job"),
    path(api + "<str:page_id>", browser_views.page_detail, name="page"),
    path(api + "<str:page_id>/lease", browser_views.lease, name="lease"),
    path(api + "<str:page_id>/plugin/<str:family>/<str:action>", plugin_views.plugin_call, name="plugin"),
    path(api + "<str:page_id>/primitive/<str:name>", plugin_views.primitive_call, name="primitive"),
    path("admin/", admin.site.urls),
    path("demo/", include("demo_site.urls")),
]


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return error_response(ApiError(404, f"No route {request.path[:200]}."))
    return HttpResponse("Not found.", status=404, content_type="text/plain")


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return error_response(internal_error())
    return HttpResponse("Server error.", status=500, content_type="text/plain")


handler404 = not_found
handler500 = server_error
