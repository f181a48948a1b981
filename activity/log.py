"""The request log: record rows in memory, flush them in bulk, sweep
old ones, and summarise them as the workload.

`RequestLog.record()` only appends to the runtime's in-memory buffer, so a
request pays no database write; the worker's `request-log` loop calls
`aflush()` every REQUEST_LOG_FLUSH_S (and once more on stop). The jobs app
logs a job with `record_job()`; the browser's relaunches and a page's crash
come from the event bus (`record_browser_event`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Max

from activity.models import KIND_BROWSER, KIND_CREDENTIAL, KIND_HTTP, KIND_JOB, RequestLogEntry
from core.api import API_PREFIX
from core.db_thread import BATCH_ROWS, drain, insert_statement, on_db_thread
from core.events import Event
from core.routes import PLUGIN

log = logging.getLogger("penelope.activity")

def plugin_route(family: str, action: str) -> str:
    """The route a plugin call is logged under, plain call or job alike."""
    return f"{PLUGIN}/{family[:64]}/{action[:64]}"


FLUSH_BATCH = 500
# The bus's events that `record_browser_event` logs.
BROWSER_EVENTS = (Event.BROWSER_UP, Event.BROWSER_FAILED, Event.PAGE_CRASHED)


class RequestLog:
    """The rows recorded since the last flush, and how many were pushed out.

    A deque: appends and pops are atomic, so `record` may be called from any
    thread (the egress guard's). Bounded, so a database that refuses writes
    for a long time costs the oldest rows, not the worker's memory. `record`
    (the event loop) and `put_back` (the database thread) both fill it; the
    lock makes "is it full, then add" one step, so every row pushed out is
    counted."""

    def __init__(self, max_rows: int | None = None) -> None:
        self.max_rows = max_rows or settings.REQUEST_LOG_BUFFER_ROWS
        self.pending: deque[dict[str, Any]] = deque(maxlen=self.max_rows)
        self.filling = threading.Lock()
        self.dropped = 0  # rows pushed out of a full buffer since the last flush

    def record(
        self,
        *,
        kind: str = KIND_HTTP,
        method: str,
        route: str,
        path: str,
        page_id: str | None,
        status: int | None,
        started_at: float,
        duration_ms: float,
        job_id: str | None = None,
    ) -> None:
        """Queue one row for the next flush. Cheap: no I/O."""
        if not settings.REQUEST_LOG:
            return
        row = {
            "kind": kind,
            "method": method[:10],
            "route": route[:200],
            "path": path[:500],
            "page_id": page_id[:64] if page_id else None,
            "status": status,
            "started_at": started_at,
            "duration_ms": round(duration_ms, 3),
            "job_id": job_id,
        }
        with self.filling:
            if len(self.pending) == self.max_rows:
                self.dropped += 1  # reported once per flush, not once per row
            self.pending.append(row)

    def record_browser_event(self, message: dict[str, Any]) -> None:
        """An event of the bus, logged when it is the browser's: `browser.up`
        as `browser/relaunch/<cause>` with its time to recover, `browser.failed`
        as `browser/failed`, `page.crashed` as `page/crashed` on its page. The
        status is null: these rows are no request and never count as work."""
        event, detail = message["event"], message.get("detail") or {}
        if event == "browser.up":
            took_ms = float(detail.get("took_s", 0)) * 1000
            route, started_at, duration_ms = f"browser/relaunch/{detail.get('cause')}", message["at"] - took_ms / 1000, took_ms
        elif event in ("browser.failed", "page.crashed"):
            route, started_at, duration_ms = event.replace(".", "/"), message["at"], 0.0
        else:
            return
        self.record(
            kind=KIND_BROWSER, method="BROWSER", route=route, path="", page_id=message.get("page_id"), status=None,
            started_at=started_at, duration_ms=duration_ms,
        )

    def record_refusal(self, method: str, target: str, why: str) -> None:
        """A connection the browser's egress guard refused (BROWSER_REFUSE_PRIVATE),
        as `browser/refused` with status 403; `target` is the URL without its
        query, or `host:port` for a tunnel. Called from the egress's thread. A
        browser row: it never counts as work."""
        self.record(
            kind=KIND_BROWSER, method=method, route="browser/refused", path=target, page_id=None, status=403,
            started_at=time.time(), duration_ms=0.0,
        )

    def record_credential_use(self, use: dict[str, Any]) -> None:
        """A flow used a credential (`ctx.credential`): a row `credentials/used`
        on its page, its path naming the credential, the plugin and the
        origin, its job id in `job_id`; never a value. Status null: no request."""
        self.record(
            kind=KIND_CREDENTIAL, method="USE", route="credentials/used",
            path=f"{use['name']} by {use['plugin']} on {use['origin']}", page_id=use.get("page_id"), status=None,
            started_at=time.time(), duration_ms=0.0, job_id=use.get("job_id"),
        )

    def record_job(
        self,
        *,
        family: str,
        action: str,
        page_id: str,
        job_id: str,
        started_at: float,
        status: int | None = None,
        duration_ms: float = 0.0,
    ) -> None:
        """Log one of a job's pair of rows: its start (no status yet), then its
        end with the status the plain call would have answered and how long the
        plugin really ran."""
        self.record(
            kind=KIND_JOB,
            method="JOB",
            route=plugin_route(family, action),
            path=f"{API_PREFIX}{page_id}/{PLUGIN}/{family}/{action}",
            page_id=page_id,
            status=status,
            started_at=started_at,
            duration_ms=duration_ms,
            job_id=job_id,
        )

    def flush(self) -> int:
        """Write the buffered rows; answers how many. On a failure the rows go back
        to the front of the buffer for the next flush, and the error is raised;
        rows that no longer fit (the newest, recorded meanwhile, are kept first)
        are counted as dropped."""
        with self.filling:
            dropped, self.dropped = self.dropped, 0
        if dropped:
            log.warning("the request log buffer was full: %d rows were dropped", dropped)
        rows: list[dict[str, Any]] = []
        while True:
            try:
                rows.append(self.pending.popleft())
            except IndexError:
                break
        if not rows:
            return 0
        try:
            insert_rows(rows)
        except Exception:
            self.put_back(rows)
            raise
        return len(rows)

    def put_back(self, rows: list[dict[str, Any]]) -> None:
        """Return unwritten rows to the front of the buffer. What does not fit
        beside the rows recorded since is dropped oldest first, and counted."""
        with self.filling:
            room = self.max_rows - len(self.pending)
            lost = max(0, len(rows) - room)
            if lost:
                self.dropped += lost
                rows = rows[lost:]
            self.pending.extendleft(reversed(rows))

    async def aflush(self) -> int:
        if not self.pending and not self.dropped:
            return 0  # the common case costs no thread hop
        return await on_db_thread(self.flush)()


def insert_rows(rows: list[dict[str, Any]]) -> None:
    """One INSERT run for every row, in one transaction: what `bulk_create`
    writes, without a model instance or a compiled query per row (the flush
    shares the interpreter with the event loop)."""
    names = list(rows[0])
    sql = insert_statement(RequestLogEntry, [RequestLogEntry._meta.get_field(name) for name in names], connection)
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), FLUSH_BATCH):
            cursor.executemany(sql, [[row[name] for name in names] for row in rows[start:start + FLUSH_BATCH]])


def sweep_request_log_batch(now: float | None = None) -> int:
    """Delete one batch of rows older than REQUEST_LOG_RETENTION_S; answers how many."""
    cutoff = (now or time.time()) - settings.REQUEST_LOG_RETENTION_S
    old = list(RequestLogEntry.objects.older_than(cutoff).values_list("pk", flat=True)[:BATCH_ROWS])
    deleted, _ = RequestLogEntry.objects.filter(pk__in=old).delete()
    return deleted


def sweep_request_log(now: float | None = None) -> int:
    """Delete rows older than REQUEST_LOG_RETENTION_S; answers how many."""
    return drain(sweep_request_log_batch, now)


# --- the workload -------------------------------------------------------------
# Computed in SQL: counts and maxima grouped by the database, each percentile
# one ordered read of a single row, so the figures cost constant memory in
# Python whatever the number of rows in the window.


def nearest_rank(pct: float, count: int) -> int:
    """The 1-based rank of the nearest-rank percentile among `count` sorted values."""
    return max(1, math.ceil(pct / 100 * count))


def workload(*, window_s: float, now: float | None = None) -> dict[str, Any]:
    """The log over the last `window_s` seconds, per route and kind: count,
    statuses and duration percentiles. A job's starting 202 is not counted;
    the job's own row is."""
    now = now or time.time()
    since = now - window_s
    rows = RequestLogEntry.objects.since(since).counted_as_work()
    groups = rows.values("route", "kind").annotate(count=Count("id"), longest=Max("duration_ms"))
    statuses: dict[tuple[str, str], dict[str, int]] = {}
    for row in rows.values("route", "kind", "status").annotate(count=Count("id")).order_by("status"):
        statuses.setdefault((row["route"], row["kind"]), {})[str(row["status"])] = row["count"]
    loads = []
    for group in groups.order_by("-count", "route", "kind"):
        route, kind, count = group["route"], group["kind"], group["count"]
        ordered = rows.filter(route=route, kind=kind).order_by("duration_ms").values_list("duration_ms", flat=True)
        loads.append(
            {
                "route": route,
                "kind": kind,
                "count": count,
                "statuses": dict(sorted(statuses[(route, kind)].items())),
                "duration_ms": {
                    "p50": round(ordered[nearest_rank(50, count) - 1], 3),
                    "p95": round(ordered[nearest_rank(95, count) - 1], 3),
                    "max": round(group["longest"], 3),
                },
            }
        )
    return {
        "window_s": window_s,
        "since": round(since, 3),
        "until": round(now, 3),
        "requests": sum(load["count"] for load in loads if load["kind"] == KIND_HTTP),
        "jobs": sum(load["count"] for load in loads if load["kind"] == KIND_JOB),
        "routes": loads,
    }
