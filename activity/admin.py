"""Read-only admin page for the request log."""

from __future__ import annotations

from django.contrib import admin

from activity.models import RequestLogEntry
from core.admin_base import ReadOnlyAdmin, when


@admin.register(RequestLogEntry)
class RequestLogEntryAdmin(ReadOnlyAdmin):
    list_display = ("started", "kind", "method", "route", "page_id", "status", "duration_ms", "job_id")
    list_filter = ("kind", "status", "route")
    search_fields = ("route", "path", "page_id", "job_id")

    @admin.display(description="started", ordering="started_at")
    def started(self, entry: RequestLogEntry) -> str:
        return when(entry.started_at)
