"""The fleet's figures as a person reads them: times in UTC and ago, sizes in
MB, durations in hours and minutes; and the fleet's rows sorted and filtered
as the page's query asks."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from console.charts import sparkline
from console.fleet import AWAKE, STATES, Row

# The columns a fleet page sorts by: the query's word, and the row's value.
SORTS = {
    "name": lambda row: row.name,
    "state": lambda row: (STATES.index(row.state), row.name),
    "memory": lambda row: row.memory_bytes or 0,
    "pages": lambda row: (row.pages_busy or 0, row.pages_open or 0),
    "running": lambda row: row.jobs_running,
    "queued": lambda row: row.jobs_queued,
    "failed_hour": lambda row: row.failed_hour,
    "failed_day": lambda row: row.failed_day,
    "next_fire": lambda row: row.next_fire_at or float("inf"),
    "last_woke": lambda row: row.last_woke_at or 0,
    "uptime": lambda row: row.uptime_s or 0,
}


def chosen(rows: list[Row], *, sort: str, descending: bool, state: str, name: str) -> list[Row]:
    kept = [row for row in rows if (not state or row.state == state) and name.lower() in row.name.lower()]
    return sorted(kept, key=SORTS.get(sort, SORTS["name"]), reverse=descending)


def clock(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(epoch: float | None, now: float | None = None) -> str:
    if epoch is None:
        return ""
    seconds = (now or time.time()) - epoch
    return f"in {span(-seconds)}" if seconds < 0 else f"{span(seconds)} ago"


def span(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours = seconds // 60, seconds // 3600
    if hours < 1:
        return f"{minutes} min"
    if hours < 48:
        return f"{hours} h {minutes % 60} min"
    return f"{hours // 24} d {hours % 24} h"


def megabytes(size: int | None) -> str:
    return "" if size is None else f"{size / 10**6:.0f} MB"


def shown(row: Row) -> dict[str, Any]:
    """A row as the fleet table prints it."""
    live = row.state == AWAKE
    return {
        **row.as_dict(),
        "memory": megabytes(row.memory_bytes),
        "memory_when": "" if live else ago(row.memory_read_at),
        "pages_when": "" if live else ago(row.pages_read_at),
        "next_fire": clock(row.next_fire_at),
        "next_fire_in": ago(row.next_fire_at),
        "last_woke": ago(row.last_woke_at),
        "uptime": span(row.uptime_s),
        "sparkline": sparkline(row.requests_by_hour),
        "requests_day": sum(row.requests_by_hour),
    }
