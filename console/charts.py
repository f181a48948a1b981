"""Charts drawn on the server as SVG: a line per series, a point per bucket,
so a page draws with JavaScript off and no chart library is served. A
missing value (a bucket with no wait, no memory read) breaks its line, and
a value alone between gaps (or a series of one reading) is drawn as a dot:
a line of one point draws nothing.

Each chart says what it read at a glance: its legend gives each series'
total over the window (calls and jobs) or its highest (the levels: queue,
wait, memory), labelled as such, beside the latest bucket's value labelled
as the latest; a y axis of a few round values with gridlines; an x axis of
times, dated on the day view; and a bucket's values on hover, from a
`<title>` per bucket (a browser's tooltip, JavaScript off) that
console.js also prints under the chart."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from console.persona_store import HOUR, MINUTE  # a bucket's length on each scale, in seconds (its SCALES)

WIDTH, HEIGHT, PAD = 480, 150, 4
# The plot's box inside the chart: room on the left for the y ticks' values,
# below for the x ticks' times.
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 8, 22
# Half a dated x label's width, about: a tick nearer the chart's edge than this is anchored at that edge.
LABEL_HALF = 32
SPARK_WIDTH, SPARK_HEIGHT = 120, 24
# A scale's words: the window a total covers, and what one bucket is.
WINDOWS = {MINUTE: ("in the last hour", "minute"), HOUR: ("in the last day", "hour")}
# An x tick every quarter of an hour on the hour's view, every six hours on the day's.
X_TICK_EVERY = {MINUTE: 15 * MINUTE, HOUR: 6 * HOUR}
# Counts (calls, jobs) add up over a window; levels (a queue's depth, a
# median wait, a peak of memory) do not, so their summary is the highest.
COUNT, LEVEL = "count", "level"
# Units that come in whole ones: no tick at half a call, or half a job queued.
WHOLE_UNITS = ("calls", "jobs")


@dataclass(frozen=True)
class Dot:
    x: float
    y: float


@dataclass(frozen=True)
class Line:
    name: str
    label: str
    segments: list[str]  # each an SVG `points` attribute
    dots: list[Dot]  # the values with no neighbour to draw a line to
    points: int  # how many values it draws
    summary: str  # the total (a count) or the highest (a level) over the window, with its unit
    latest: str  # the latest value with its unit, or "none"
    latest_label: str  # "latest minute", or "latest at 20:14" when the newest buckets hold no value


@dataclass(frozen=True)
class Tick:
    at: float  # x or y in the chart's box
    label: str
    anchor: str = "middle"  # an x tick's label at either end stays inside the chart


@dataclass(frozen=True)
class Bucket:
    """A bucket's strip of the plot, for hovering: its values in words."""

    index: int
    x: float  # its point's x
    left: float
    width: float
    words: str


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    kind: str
    lines: list[Line]
    top: float
    width: int
    height: int
    window: str  # "in the last hour"
    bucket: str  # "minute"
    summary_word: str  # "total" or "highest"
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    buckets: list[Bucket]
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int

    @property
    def plot_height(self) -> int:
        return self.plot_bottom - self.plot_top


def scaled(values: list[float | None], top: float, width: int, height: int) -> list[str]:
    """`values` as the points of polylines over the box, split at each None."""
    return [points_of(run) for run in runs(values, top, (PAD, PAD, width - PAD, height - PAD))]


def runs(values: list[float | None], top: float, box: tuple[float, float, float, float]) -> list[list[Dot]]:
    """`values` placed in `box` (left, top, right, bottom), in runs split at
    each None: 0 at the bottom, `top` at the top, one step a bucket."""
    left, upper, right, bottom = box
    step = (right - left) / max(len(values) - 1, 1)
    found, current = [], []
    for index, value in enumerate(values):
        if value is None:
            if current:
                found.append(current)
            current = []
            continue
        current.append(Dot(left + index * step, bottom - (value / top if top else 0) * (bottom - upper)))
    if current:
        found.append(current)
    return found


def points_of(run: list[Dot]) -> str:
    return " ".join(f"{dot.x:.1f},{dot.y:.1f}" for dot in run)


def nice_top(highest: float, whole: bool) -> float:
    """The scale's top: the first of 1, 2, 2.5, 5 times a power of ten at or
    above `highest`, so the ticks read as round values. A count's is whole."""
    if highest <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(highest))
    top = next(factor * power for factor in (1, 2, 2.5, 5, 10) if factor * power >= highest - 1e-9)
    return float(max(1, math.ceil(top))) if whole else top


def y_ticks(top: float, whole: bool, box: tuple[float, float, float, float]) -> list[Tick]:
    """0, the middle and the top, where each reads as a value (no half a call)."""
    _, upper, _, bottom = box
    values = [0.0, top / 2, top]
    if whole:
        values = [value for value in values if value == int(value)]
    return [Tick(bottom - value / top * (bottom - upper), number(value)) for value in values]


def number(value: float) -> str:
    """A value as a person reads it: no trailing zeros, no false precision."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}".removesuffix(".0")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def with_unit(value: float, unit: str) -> str:
    return number(value) if unit in WHOLE_UNITS else f"{number(value)} {unit}"


def clock(epoch: float, step: float = MINUTE) -> str:
    """A bucket's time: its hour and minute, dated on the day's view."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return f"{moment.day} {moment:%b %H:%M}" if step >= HOUR else f"{moment:%H:%M}"


def x_ticks(start: float, step: float, count: int, box: tuple[float, float, float, float]) -> list[Tick]:
    """A tick at each round time (the quarter hour, every sixth hour) the window holds."""
    left, _, right, _ = box
    every = X_TICK_EVERY.get(step, step * max(count // 4, 1))
    width = (right - left) / max(count - 1, 1)
    ticks = []
    for index in range(count):
        if (start + index * step) % every:
            continue
        x = left + index * width
        anchor = "start" if x < LABEL_HALF else "end" if WIDTH - x < LABEL_HALF else "middle"
        ticks.append(Tick(x, clock(start + index * step, step), anchor))
    return ticks


def chart(
    title: str,
    unit: str,
    series: dict[str, tuple[str, list[float | None]]],
    start: float,
    step: float,
    kind: str = COUNT,
) -> Chart:
    """One chart of several series (name: (label, values)) sharing a scale."""
    known = [value for _, values in series.values() for value in values if value is not None]
    whole = unit in WHOLE_UNITS
    top = nice_top(max(known, default=0), whole)
    box = (LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM)
    window, bucket_word = WINDOWS.get(step, ("in the window", "bucket"))
    count = max((len(values) for _, values in series.values()), default=0)
    lines = []
    for name, (label, values) in series.items():
        placed = runs(values, top, box)
        present = [value for value in values if value is not None]
        summary = sum(present) if kind == COUNT else max(present, default=None)
        last = next((index for index in range(len(values) - 1, -1, -1) if values[index] is not None), None)
        lines.append(
            Line(
                name=name,
                label=label,
                segments=[points_of(run) for run in placed if len(run) > 1],
                dots=[run[0] for run in placed if len(run) == 1],
                points=len(present),
                summary="none" if summary is None else with_unit(summary, unit),
                latest="none" if last is None else with_unit(values[last], unit),
                latest_label=(
                    f"latest {bucket_word}"
                    if last is None or last == len(values) - 1
                    else f"latest at {clock(start + last * step, step)}"
                ),
            )
        )
    return Chart(
        title=title,
        unit=unit,
        kind=kind,
        lines=lines,
        top=top,
        width=WIDTH,
        height=HEIGHT,
        window=window,
        bucket=bucket_word,
        summary_word="total" if kind == COUNT else "highest",
        y_ticks=y_ticks(top, whole, box),
        x_ticks=x_ticks(start, step, count, box),
        buckets=buckets(series, start, step, count, unit, box),
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        plot_top=TOP,
        plot_bottom=HEIGHT - BOTTOM,
    )


def buckets(
    series: dict[str, tuple[str, list[float | None]]],
    start: float,
    step: float,
    count: int,
    unit: str,
    box: tuple[float, float, float, float],
) -> list[Bucket]:
    """Each bucket's strip of the plot, centred on its point, and its values in words."""
    left, _, right, _ = box
    width = (right - left) / max(count - 1, 1)
    made = []
    for index in range(count):
        x = left + index * width
        begins, ends = max(left, x - width / 2), min(right, x + width / 2)
        values = ", ".join(
            f"{label} {'none' if index >= len(values) or values[index] is None else with_unit(values[index], unit)}"
            for label, values in series.values()
        )
        made.append(Bucket(index, x, begins, ends - begins, f"{clock(start + index * step, step)} UTC: {values}"))
    return made


def sparkline(values: list[int]) -> str:
    """The points of a row's small line of requests per hour."""
    top = max(values, default=0) or 1
    segments = scaled([float(value) for value in values], top, SPARK_WIDTH, SPARK_HEIGHT)
    return segments[0] if segments else ""


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
        chart("Queue depth", "jobs", {"queue": ("queued", shaped["queue"])}, start, step, LEVEL),
        chart("Wait for a page (median)", "s", {"wait": ("wait", shaped["wait_p50_s"])}, start, step, LEVEL),
        chart("Memory charged (peak)", "MB", {"memory": ("memory", megabytes)}, start, step, LEVEL),
    ]
