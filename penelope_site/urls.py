"""Routes, and the wiring between the apps: the plugin route is given the
jobs' starter, the activity route the jobs' counts and the metrics route the
jobs held, so neither app imports the jobs app. What they are given holds no
state: the worker's state is its runtime's (worker/runtime.py), which each
request carries (core/runtime.py). Everything under /api/v1 answers with the
envelope, errors included."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path, reverse_lazy

from activity.metrics import MetricsView
from activity.overview import OverviewJobsView, OverviewView
from activity.views import ActivityView, HealthView, WorkloadView
from browser.views import Lease, PageDetail, Pages, Purge
from cdp.views import PageCdp
from core.api import API_PREFIX, internal_error
from core.db_thread import on_db_thread
from core.rest import NoRoute, error_response
from core.schema import SchemaView
from credentials.views import CredentialCollection, CredentialDetail
from jobs import selectors as job_selectors
from jobs.pressure import PressureView
from jobs.starting import JobStart
from jobs.views import JobCancel, JobDetail, JobListView, JobRerun
from live.views import PageLive, live_page
from media_store.views import Download, Upload
from plugins.views import PluginCall, PrimitiveCall
from schedules.views import ScheduleCollection, ScheduleDetail, ScheduleTrigger

api = "api/v1/"

urlpatterns = [
    path(api + "health", HealthView.as_view(), name="health"),
    path(api + "activity", ActivityView.as_view(job_counts=on_db_thread(job_selectors.counts)), name="activity"),
    path(api + "workload", WorkloadView.as_view(), name="workload"),
    path(api + "metrics", MetricsView.as_view(jobs_held=job_selectors.held_by_state, job_counts=on_db_thread(job_selectors.counts)), name="metrics"),
    path(api + "pressure", PressureView.as_view(), name="pressure"),
    path(api + "overview", OverviewView.as_view(), name="overview"),
    path(api + "overview/jobs", OverviewJobsView.as_view(), name="overview_jobs"),
    path(api + "purge", Purge.as_view(), name="purge"),
    path(api + "schema", SchemaView.as_view(), name="schema"),
    path(api + "pages", Pages.as_view(), name="pages"),
    path(api + "media", Upload.as_view(), name="media_upload"),
    path(api + "media/<str:token>", Download.as_view(), name="media"),
    path(api + "jobs", JobListView.as_view(), name="jobs"),
    path(api + "jobs/<str:job_id>", JobDetail.as_view(), name="job"),
    path(api + "jobs/<str:job_id>/cancel", JobCancel.as_view(), name="job_cancel"),
    path(api + "jobs/<str:job_id>/rerun", JobRerun.as_view(), name="job_rerun"),
    path(api + "schedules", ScheduleCollection.as_view(), name="schedules"),
    path(api + "schedules/<str:schedule_id>", ScheduleDetail.as_view(), name="schedule"),
    path(api + "schedules/<str:schedule_id>/trigger", ScheduleTrigger.as_view(), name="schedule_trigger"),
    path(api + "credentials", CredentialCollection.as_view(), name="credentials"),
    path(api + "credentials/<str:name>", CredentialDetail.as_view(), name="credential"),
    path(api + "<str:page_id>", PageDetail.as_view(), name="page"),
    path(api + "<str:page_id>/lease", Lease.as_view(), name="lease"),
    path(api + "<str:page_id>/live", PageLive.as_view(), name="live"),
    path(api + "<str:page_id>/cdp", PageCdp.as_view(), name="cdp"),
    path(api + "<str:page_id>/plugin/<str:family>/<str:action>", PluginCall.as_view(jobs=JobStart()), name="plugin"),
    path(api + "<str:page_id>/primitive/<str:name>", PrimitiveCall.as_view(), name="primitive"),
    re_path(r"^api/v1/", NoRoute.as_view(), name="no_route"),
    path("admin/", admin.site.urls),
    path("demo/", include("demo_site.urls")),
    path("live/<str:token>", live_page, name="live_page"),
]


# The admin's "View site" leads to the worker's health (`/` is no page),
# under the request's root path (`/w/{persona}/api/v1/health` through the
# waker, which answers it without a key and never wakes a worker for it).
admin.site.site_url = reverse_lazy("health")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return HttpResponse("Not found.", status=404, content_type="text/plain")


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return error_response(internal_error())
    return HttpResponse("Server error.", status=500, content_type="text/plain")


handler404 = not_found
handler500 = server_error
