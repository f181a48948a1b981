"""Charts drawn on the server as SVG: a line per series, a point per bucket,
so a page draws with JavaScript off and no chart library is served. A
missing value (a bucket with no wait, no memory read) breaks its line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

WIDTH, HEIGHT, PAD = 480, 120, 4
SPARK_WIDTH, SPARK_HEIGHT = 120, 24


@dataclass(frozen=True)
class Line:
    name: str
    label: str
    segments: list[str]  # each an SVG `points` attribute
    points: int  # how many values it draws
    latest: float | None


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    lines: list[Line]
    top: float
    width: int
    height: int
    starts: str
    ends: str


def scaled(values: list[float | None], top: float, width: int, height: int) -> list[str]:
    """`values` as the points of polylines over the box, split at each None."""
    count = len(values)
    step = (width - 2 * PAD) / max(count - 1, 1)
    segments, current = [], []
    for index, value in enumerate(values):
        if value is None:
            if current:
                segments.append(" ".join(current))
            current = []
            continue
        x = PAD + index * step
        y = height - PAD - (value / top if top else 0) * (height - 2 * PAD)
        current.append(f"{x:.1f},{y:.1f}")
    if current:
        segments.append(" ".join(current))
    return segments


def chart(
    title: str, unit: str, series: dict[str, tuple[str, list[float | None]]], start: float, step: float
) -> Chart:
    """One chart of several series (name: (label, values)) sharing a scale."""
    known = [value for _, values in series.values() for value in values if value is not None]
    top = max(known, default=0) or 1
    lines = [
        Line(
            name=name,
            label=label,
            segments=scaled(values, top, WIDTH, HEIGHT),
            points=sum(value is not None for value in values),
            latest=next((value for value in reversed(values) if value is not None), None),
        )
        for name, (label, values) in series.items()
    ]
    count = max((len(values) for _, values in series.values()), default=0)
    return Chart(title, unit, lines, top, WIDTH, HEIGHT, clock(start), clock(start + count * step))


def sparkline(values: list[int]) -> str:
    """The points of a row's small line of requests per hour."""
    top = max(values, default=0) or 1
    segments = scaled([float(value) for value in values], top, SPARK_WIDTH, SPARK_HEIGHT)
    return segments[0] if segments else ""


def clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M")


def workload_charts(overview: dict, memory: dict[str, list[int | None]], scale: str) -> list[Chart]:
    """A persona's charts at one scale (`minute` or `hour`)."""
    shaped = overview["series"][scale]
    start, step = shaped["start"], shaped["step"]
    megabytes = [None if each is None else round(each / 10**6, 1) for each in memory[scale]]
    return [
        chart(
            "Calls",
            "calls",
            {"calls_ok": ("answered", shaped["calls_ok"]), "calls_failed": ("failed", shaped["calls_failed"])},
            start,
            step,
        ),
        chart(
            "Jobs",
            "jobs",
            {"jobs_ok": ("done", shaped["jobs_ok"]), "jobs_failed": ("failed", shaped["jobs_failed"])},
            start,
            step,
        ),
        chart("Queue depth", "jobs", {"queue": ("queued", shaped["queue"])}, start, step),
        chart("Wait for a page (median)", "s", {"wait": ("wait", shaped["wait_p50_s"])}, start, step),
        chart("Memory charged (peak)", "MB", {"memory": ("memory", megabytes)}, start, step),
    ]
