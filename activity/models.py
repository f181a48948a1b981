"""The request log: one row per API request that did work, and per job.

Rows are written in bulk by `activity.log` (never inside a request) and kept
REQUEST_LOG_RETENTION_S seconds. The workload summarises them.
"""

from __future__ import annotations

from django.db import models

from core.routes import PLUGIN

KIND_HTTP = "http"
KIND_JOB = "job"
# What happened to the browser: a relaunch (with its time to recover), a
# relaunch that failed, a page's crashed renderer. Never counted as work.
KIND_BROWSER = "browser"
# A CDP connection's opening, its refused messages and its close (cdp/hub.py).
KIND_CDP = "cdp"
# A flow's use of a persona's credential (plugins/signing_in.py): its name,
# plugin, job and origin, never a value. Not a request: never counted as work.
KIND_CREDENTIAL = "cred"
# The route of a plugin call, whatever its page: the workload groups by it.
PLUGIN_ROUTE_PREFIX = f"{PLUGIN}/"


class RequestLogQuerySet(models.QuerySet):
    def since(self, started_after: float) -> RequestLogQuerySet:
        return self.filter(started_at__gte=started_after)

    def older_than(self, cutoff: float) -> RequestLogQuerySet:
        return self.filter(started_at__lt=cutoff)

    def counted_as_work(self) -> RequestLogQuerySet:
        """Everything but the 202 that starts a job and the job's start row:
        a job counts once, by its end row."""
        return (
            self.exclude(kind=KIND_HTTP, status=202, route__startswith=PLUGIN_ROUTE_PREFIX)
            .exclude(status__isnull=True)
            .exclude(kind=KIND_BROWSER)
        )


class RequestLogEntry(models.Model):
    started_at = models.FloatField(db_index=True)  # epoch seconds
    kind = models.CharField(max_length=8, default=KIND_HTTP)  # "http", "job", "browser", "cdp" or "cred"
    method = models.CharField(max_length=10)
    # `plugin/<family>/<action>`, `primitive/<name>`, or the URL pattern under
    # /api/v1/ (e.g. `{page_id}/lease`); see docs/reference/API.md.
    route = models.CharField(max_length=200)
    path = models.CharField(max_length=500)
    page_id = models.CharField(max_length=64, null=True, blank=True)
    # Null on a job's start row: the job's end row carries its status.
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.FloatField()
    job_id = models.CharField(max_length=64, null=True, blank=True)

    objects = RequestLogQuerySet.as_manager()

    class Meta:
        ordering = ["started_at"]
        verbose_name_plural = "request log entries"

    def __str__(self) -> str:
        return f"{self.method} {self.route} {self.status} {self.duration_ms:.1f} ms"
