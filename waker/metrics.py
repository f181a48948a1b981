"""The waker's Prometheus metrics, at its own `GET /api/v1/metrics`: a
registry of its own (the waker imports nothing of the worker's, its metrics
included), counters fed by the supervisor where a worker starts or stops, and
the personas' state read at each scrape (`Personas`).

Every label is bounded: `persona` takes the personas file's names, fixed for
the waker's life; `outcome` and `reason` are the few listed here.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from waker.personas import Persona

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
STATES = ("stopped", "starting", "running", "stopping")
WAKE_OUTCOMES = ("started", "failed")
# idle: a sleepy worker's idle timeout; asked: an operator's stop; waker: the waker itself stopped.
STOP_REASONS = ("idle", "asked", "waker", "browser_failed")

disable_created_metrics()  # `_created` series: a timestamp the text format does not use
registry = CollectorRegistry()
ProcessCollector(registry=registry)  # the waker process's own CPU, memory and open files

# A worker starts in 1.5 to 2 s here (its browser's launch); WAKER_START_TIMEOUT_S is 90.
WAKE_BUCKETS = (0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 15, 30, 60, 90)

wakes = Counter(
    "penelope_waker_wakes",
    "Worker starts, by persona and outcome (started: healthy; failed): on demand, by the start route, or by the policy.",
    ["persona", "outcome"], registry=registry,
)
wake_duration = Histogram(
    "penelope_waker_wake_duration_seconds", "From a worker's spawn to its first healthy answer, for starts that succeeded.",
    ["persona"], buckets=WAKE_BUCKETS, registry=registry,
)
stops = Counter(
    "penelope_waker_stops",
    "Workers the waker stopped, by persona and reason (idle, asked, waker, browser_failed); recycles are counted apart.",
    ["persona", "reason"], registry=registry,
)
schedule_wakes = Counter(
    "penelope_waker_schedule_wakes", "Sleeping workers started for a schedule's fire (their store's next-wake-at).",
    ["persona"], registry=registry,
)
recycles = Counter(
    "penelope_waker_recycles", "`always` workers stopped at their recycle interval (and started again).", ["persona"],
    registry=registry,
)


def known(personas: Iterable[str]) -> None:
    """Every persona's series exist, at 0, from the start."""
    for name in personas:
        for outcome in WAKE_OUTCOMES:
            wakes.labels(name, outcome)
        wake_duration.labels(name)
        for reason in STOP_REASONS:
            stops.labels(name, reason)
        recycles.labels(name)
        schedule_wakes.labels(name)


def woke(persona: str, seconds: float) -> None:
    wakes.labels(persona, "started").inc()
    wake_duration.labels(persona).observe(seconds)


def wake_failed(persona: str) -> None:
    wakes.labels(persona, "failed").inc()


def stopped(persona: str, reason: str) -> None:
    stops.labels(persona, reason).inc()


def woken_for_schedule(persona: str) -> None:
    schedule_wakes.labels(persona).inc()


def recycled(persona: str) -> None:
    recycles.labels(persona).inc()


class WorkerState(Protocol):
    """What a scrape reads of a persona's worker (waker/persona_worker.py's
    `PersonaWorker`, which feeds the counters above and so is not imported here)."""

    persona: Persona
    state: str
    forwards_in_flight: int
    unexpected_exits: int


class Personas(Collector):
    """The personas' state as the waker holds it, at the scrape."""

    def __init__(self, workers: Iterable[WorkerState]) -> None:
        self.workers = list(workers)

    def collect(self) -> Iterator[Metric]:
        by_state = Tally(worker.state for worker in self.workers)
        personas = GaugeMetricFamily("penelope_waker_personas", "Personas by their worker's state.", labels=["state"])
        for state in STATES:
            personas.add_metric([state], by_state[state])
        yield personas
        running = GaugeMetricFamily(
            "penelope_waker_persona_running", "1 while the persona's worker runs (healthy), else 0.", labels=["persona"]
        )
        forwards = GaugeMetricFamily(
            "penelope_waker_forwards_in_flight", "Requests the waker is passing to the persona's worker now.",
            labels=["persona"],
        )
        exits = CounterMetricFamily(
            "penelope_waker_unexpected_exits", "Worker processes that ended without the waker stopping them.",
            labels=["persona"],
        )
        for worker in self.workers:
            name = worker.persona.name
            running.add_metric([name], int(worker.state == "running"))
            forwards.add_metric([name], worker.forwards_in_flight)
            exits.add_metric([name], worker.unexpected_exits)
        yield running
        yield forwards
        yield exits


class Scrape:
    def __init__(self, state: Collector) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield from registry.collect()
        yield from self.state.collect()


def render(workers: Iterable[WorkerState]) -> bytes:
    """The waker's metrics in the Prometheus text format (0.0.4)."""
    return generate_latest(Scrape(Personas(workers)))
