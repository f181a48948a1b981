"""The worker's Prometheus metrics: its own registry, the counters and
histograms, and the hooks that feed them from the few places where things
happen.

- a request's end: the activity gate (`observe_request`);
- a job's start and end: the event bus (`Bus.publish` calls `on_event`),
  and recovery at start for the jobs a previous run left running;
- a webhook attempt's outcome: `jobs.delivery.post` (`webhook_attempt`);
- a memory purge: `browser.purge` (`purged`);
- a browser relaunch and a page's crash: `browser.runner` and `browser.pages`.
- a schedule's fire: `schedule.fired` and `schedule.skipped` on the bus, and
  `schedules.firing` for the fires missed and refused.

What is state rather than an event (pages, jobs and media held, the
browser's memory) is not counted here: it is read when a scrape asks
(`activity/metrics.py`), so a gauge can never drift from what it measures.

The registry is the worker's own, not prometheus_client's global one, so
nothing else in the process (a test, a library) adds to or collides with it.
With METRICS_ENABLED off every hook returns at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from django.conf import settings
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

ENABLED: bool = settings.METRICS_ENABLED
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# `_created` series would double every counter's and histogram's series for a
# timestamp Prometheus's text format does not use.
disable_created_metrics()

registry = CollectorRegistry()
# The worker process's own CPU, memory and open files (process_*).
ProcessCollector(registry=registry)

# Seconds. From a millisecond read of memory to a plugin that scrolls for minutes.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
ATTEMPT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# A delivery after retries comes minutes after the job's end (WEBHOOK_ATTEMPTS_S).
DELIVERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60, 300, 600, 1800, 3600)

requests = Counter(
    "penelope_requests", "API requests answered, by route (as the request log names it) and status.",
    ["route", "status"], registry=registry,
)
request_duration = Histogram(
    "penelope_request_duration_seconds", "From a request to its answer (a download: to its last byte), by route.",
    ["route"], buckets=REQUEST_BUCKETS, registry=registry,
)
jobs_started = Counter("penelope_jobs_started", "Jobs started, by mode (poll, webhook).", ["mode"], registry=registry)
jobs_ended = Counter(
    "penelope_jobs_ended",
    "Jobs ended, by state: done, cancelled, or interrupted (left running by the worker's previous run, ended at this start).",
    ["state"], registry=registry,
)
webhook_attempts = Counter(
    "penelope_webhook_attempts", "Webhook POSTs made, by outcome (delivered, retry, gave_up).", ["outcome"],
    registry=registry,
)
webhook_attempt_duration = Histogram(
    "penelope_webhook_attempt_duration_seconds", "One webhook POST, from its send to the receiver's answer or its failure.",
    buckets=ATTEMPT_BUCKETS, registry=registry,
)
webhook_delivery_latency = Histogram(
    "penelope_webhook_delivery_latency_seconds",
    "From a webhook job's end to the receiver's 2xx, retries included.",
    buckets=DELIVERY_BUCKETS, registry=registry,
)
purges = Counter("penelope_purges", "Memory purges run (every PURGE_S, and POST /api/v1/purge).", registry=registry)
# From a browser's stop (or a recycle's start) to the new browser taking calls.
RECOVERY_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120, 300)
browser_relaunches = Counter(
    "penelope_browser_relaunches",
    "Browser relaunches, by cause: browser_stopped (it exited), memory (BROWSER_MAX_MB), calls (BROWSER_RECYCLE_AFTER_CALLS).",
    ["cause"], registry=registry,
)
browser_recovery = Histogram(
    "penelope_browser_recovery_seconds", "From the browser's stop (or a recycle's start) to the new browser taking calls.",
    buckets=RECOVERY_BUCKETS, registry=registry,
)
# From a queued job's acceptance to the moment it takes its page.
QUEUE_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
queue_wait = Histogram(
    "penelope_queue_wait_seconds", "How long queued jobs (X-Queue-Timeout) waited for their page before they ran.",
    buckets=QUEUE_WAIT_BUCKETS, registry=registry,
)
queue_refused = Counter(
    "penelope_queue_refused", "Job starts refused with 429 because their page's queue was full (QUEUE_MAX).", registry=registry,
)
job_retries = Counter(
    "penelope_job_retries", "Job attempts that ended transient with attempts left (X-Retry), by status.", ["status"],
    registry=registry,
)
cdp_connections = Counter(
    "penelope_cdp_connections", "CDP connections (/cdp/<token>) opened and closed, by event.", ["event"], registry=registry,
)
cdp_refusals = Counter(
    "penelope_cdp_refused", "CDP messages the worker refused a client (cdp/policy.py), by method.", ["method"], registry=registry,
)
page_crashes = Counter("penelope_page_crashes", "Page renderers that crashed (each page reopened before its next call).", registry=registry)
# Schedules (schedules/): each fire ends one of four ways.
schedule_fires = Counter("penelope_schedule_fires", "Schedule fires that started their job.", registry=registry)
schedule_skips = Counter(
    "penelope_schedule_skips", "Schedule fires skipped: the previous job still ran (overlap `skip`).", registry=registry,
)
schedule_misses = Counter(
    "penelope_schedule_misses", "Schedule fires missed while the worker was stopped (past `catchup_s`), or run late.",
    registry=registry,
)
# By the status a client's start would have had: a handful of values, where a
# label per schedule would grow with every schedule ever made.
schedule_refusals = Counter(
    "penelope_schedule_refusals",
    "Schedule fires whose job start was refused, by status (404 page not open, 429 a full queue, 503 MAX_JOBS...).",
    ["status"], registry=registry,
)

# Every label value these families can take is known: their series exist, at
# 0, from the start, so a rate over them needs no first event.
for _mode in ("poll", "webhook"):
    jobs_started.labels(_mode)
for _state in ("done", "cancelled", "interrupted", "timed_out"):
    jobs_ended.labels(_state)
for _outcome in ("delivered", "retry", "gave_up"):
    webhook_attempts.labels(_outcome)
for _cause in ("browser_stopped", "memory", "calls"):
    browser_relaunches.labels(_cause)
for _status in ("400", "404", "423", "429", "503"):  # the refusals a schedule's trigger documents
    schedule_refusals.labels(_status)

# A request's pair of series, by (route, status): `labels()` takes a lock and
# checks its arguments on every call; a dict lookup is all a request pays.
_request_series: dict[tuple[str, int], tuple[Counter, Histogram]] = {}


def observe_request(route: str, status: int, seconds: float) -> None:
    """One API request answered. `route` must come from a bounded set (the
    gate names unknown plugin actions and primitives as one route each)."""
    if not ENABLED:
        return
    series = _request_series.get((route, status))
    if series is None:
        series = _request_series.setdefault((route, status), (requests.labels(route, str(status)), request_duration.labels(route)))
    series[0].inc()
    series[1].observe(seconds)


def on_event(event: str, fields: dict[str, object]) -> None:
    """An event published on the bus: a job's start and end are counted."""
    if not ENABLED:
        return
    if event == "job.started":
        jobs_started.labels(fields.get("mode") or "unknown").inc()
    elif event == "job.ended":
        jobs_ended.labels(fields.get("state") or "unknown").inc()
    elif event == "schedule.fired":
        schedule_fires.inc()
    elif event == "schedule.skipped":
        schedule_skips.inc()


def jobs_interrupted(count: int) -> None:
    """Jobs the previous run left running, ended `interrupted` by recovery."""
    if ENABLED and count:
        jobs_ended.labels("interrupted").inc(count)


def webhook_attempt(outcome: str, seconds: float, since_end_s: float | None = None) -> None:
    """One webhook POST and its outcome; a delivery also tells how long after
    the job's end it came."""
    if not ENABLED:
        return
    webhook_attempts.labels(outcome).inc()
    webhook_attempt_duration.observe(seconds)
    if since_end_s is not None:
        webhook_delivery_latency.observe(max(0.0, since_end_s))


def purged() -> None:
    if ENABLED:
        purges.inc()


def browser_relaunched(cause: str, seconds: float) -> None:
    """The browser runs again after a stop or a recycle, `seconds` after it began."""
    if ENABLED:
        browser_relaunches.labels(cause).inc()
        browser_recovery.observe(seconds)


def page_crashed() -> None:
    if ENABLED:
        page_crashes.inc()


def cdp_connection(event: str) -> None:
    if ENABLED:
        cdp_connections.labels(event).inc()


def cdp_refused(method: str) -> None:
    if ENABLED:
        cdp_refusals.labels(method[:64]).inc()


class Scrape:
    """What one scrape shows: the registry, then the collectors of state read for it."""

    def __init__(self, state: Iterable[Collector]) -> None:
        self.state = list(state)

    def collect(self) -> Iterator[Metric]:
        yield from registry.collect()
        for collector in self.state:
            yield from collector.collect()


def render(*state: Collector) -> bytes:
    """The registry and `state` in the Prometheus text format (0.0.4)."""
    return generate_latest(Scrape(state))


def job_waited(seconds: float) -> None:
    """A queued job took its page after `seconds` in its queue."""
    if ENABLED:
        queue_wait.observe(seconds)


def jobs_retried(status: int | str, count: int = 1) -> None:
    """Attempts that ended transient and went back in line (`interrupted`: by a restart)."""
    if ENABLED and count:
        job_retries.labels(str(status)).inc(count)


def queue_full() -> None:
    if ENABLED:
        queue_refused.inc()


def schedule_missed(count: int) -> None:
    if ENABLED and count:
        schedule_misses.inc(count)


def schedule_refused(status: int) -> None:
    if ENABLED:
        schedule_refusals.labels(str(status)).inc()
