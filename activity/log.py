"""The request log's service: record rows in memory, flush them in bulk, sweep
old ones, and summarise them as the workload.

`record()` only appends to an in-memory buffer, so a request pays no database
write; the worker's `request-log` loop calls `aflush()` every
REQUEST_LOG_FLUSH_S (and once more on stop). The jobs app logs a job with
`record_job()`.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from activity.models import KIND_HTTP, KIND_JOB, RequestLogEntry

log = logging.getLogger("penelope.activity")

# Rows waiting for the next flush. A deque: appends and pops are atomic, so
# `record` may be called from any thread. Bounded, so a database that refuses
# writes for a long time costs the oldest rows, not the worker's memory.
BUFFER_MAX_ROWS = 50_000
_pending: deque[dict[str, Any]] = deque(maxlen=BUFFER_MAX_ROWS)
FLUSH_BATCH = 500
# Rows pushed out of a full buffer since the last flush.
_dropped = 0


def plugin_route(family: str, action: str) -> str:
    """The route a plugin call is logged under, plain call or job alike."""
    return f"plugin/{family[:64]}/{action[:64]}"


def record(
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
    global _dropped
    if len(_pending) == BUFFER_MAX_ROWS:
        _dropped += 1  # reported once per flush, not once per row
    _pending.append(
        {
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
    )


def record_job(
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
    record(
        kind=KIND_JOB,
        method="JOB",
        route=plugin_route(family, action),
        path=f"/api/v1/{page_id}/plugin/{family}/{action}",
        page_id=page_id,
        status=status,
        started_at=started_at,
        duration_ms=duration_ms,
        job_id=job_id,
    )


def pending_count() -> int:
    return len(_pending)


def flush() -> int:
    """Write the buffered rows; answers how many. On a failure the rows go back
    to the front of the buffer for the next flush, and the error is raised."""
    global _dropped
    if _dropped:
        log.warning("the request log buffer was full: %d rows were dropped", _dropped)
        _dropped = 0
    rows: list[dict[str, Any]] = []
    while True:
        try:
            rows.append(_pending.popleft())
        except IndexError:
            break
    if not rows:
        return 0
    try:
        RequestLogEntry.objects.bulk_create([RequestLogEntry(**row) for row in rows], batch_size=FLUSH_BATCH)
    except Exception:
        _pending.extendleft(reversed(rows))
        raise
    return len(rows)


async def aflush() -> int:
    if not _pending and not _dropped:
        return 0  # the common case costs no thread hop
    return await sync_to_async(flush)()


def sweep_request_log(now: float | None = None) -> int:
    """Delete rows older than REQUEST_LOG_RETENTION_S; answers how many."""
    cutoff = (now or time.time()) - settings.REQUEST_LOG_RETENTION_S
    deleted, _ = RequestLogEntry.objects.older_than(cutoff).delete()
    return deleted


async def asweep_request_log(now: float | None = None) -> int:
    return await sync_to_async(sweep_request_log)(now)


# --- the workload -------------------------------------------------------------


@dataclass
class RouteLoad:
    route: str
    kind: str
    durations_ms: list[float]
    statuses: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.durations_ms)
        return {
            "route": self.route,
            "kind": self.kind,
            "count": len(ordered),
            "statuses": dict(sorted(self.statuses.items())),
            "duration_ms": {
                "p50": percentile(ordered, 50),
                "p95": percentile(ordered, 95),
                "max": round(ordered[-1], 3),
            },
        }


def percentile(ordered: list[float], pct: float) -> float:
    """The nearest-rank percentile of sorted values."""
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return round(ordered[rank - 1], 3)


def workload(*, window_s: float, now: float | None = None) -> dict[str, Any]:
    """The log over the last `window_s` seconds, per route and kind: count,
    statuses and duration percentiles. A job's starting 202 is not counted;
    the job's own row is."""
    now = now or time.time()
    since = now - window_s
    loads: dict[tuple[str, str], RouteLoad] = {}
    rows = RequestLogEntry.objects.since(since).counted_as_work().values_list("route", "kind", "status", "duration_ms")
    for route, kind, status, duration_ms in rows.iterator(chunk_size=2000):
        load = loads.get((route, kind))
        if load is None:
            load = loads[(route, kind)] = RouteLoad(route, kind, [], {})
        load.durations_ms.append(duration_ms)
        load.statuses[str(status)] = load.statuses.get(str(status), 0) + 1
    routes = sorted(loads.values(), key=lambda load: (-len(load.durations_ms), load.route, load.kind))
    return {
        "window_s": window_s,
        "since": round(since, 3),
        "until": round(now, 3),
        "requests": sum(len(load.durations_ms) for load in loads.values() if load.kind == KIND_HTTP),
        "jobs": sum(len(load.durations_ms) for load in loads.values() if load.kind == KIND_JOB),
        "routes": [load.as_dict() for load in routes],
    }
