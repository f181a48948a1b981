"""The queue (X-Queue-Timeout): what the option costs a start that runs at
once, how soon a queued job starts after the one before it on its page ends,
and how fast a worker drains a thousand no-op jobs queued on `any`, against
RQ's SimpleWorker draining a thousand no-op jobs enqueued the same way."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx

from bench import load
from bench.report import Plan, Report, Row, lat, ms
from bench.stats import Latency
from bench.worker_calls import HOLD, PLUGINS, POLL_TTL_S, start_job, wait_done
from harness.worker import WorkerProcess, free_port

QUEUED = {"X-Result-Ttl": POLL_TTL_S, "X-Queue-Timeout": "600"}
DRAIN_PAGES = 8  # MAX_PAGES of the drain's worker
ANY_NOOP = "/any/plugin/bench/noop"


def queue_phase(client: httpx.Client, plan: Plan, report: Report, scratch: Path) -> None:
    option_cost(client, plan, report)
    dispatch(client, plan, report)
    drain(plan, report, scratch)


def option_cost(client: httpx.Client, plan: Plan, report: Report) -> None:
    """A start on an idle page with X-Queue-Timeout against one without,
    alternating: the header costs a start that runs at once this much."""
    plain, queued = [], []
    for _ in range(plan.c1_requests // 2):
        for headers, into in (({"X-Result-Ttl": POLL_TTL_S}, plain), (QUEUED, queued)):
            elapsed, job_id = load.timed_ms(lambda headers=headers: start_job(client, HOLD, **headers))
            into.append(elapsed)
            wait_done(client, job_id)
    without, with_header = Latency.of(plain), Latency.of(queued)
    ratio = with_header.p50 / without.p50
    report.add(Row("Job start with X-Queue-Timeout that runs at once (an idle page), c=1", lat(with_header),
                   f"without the header p50 {ms(without.p50)}", f"{ratio:.3f} ×", "p50 ≤ 1.05 × without", ratio <= 1.05))


def dispatch(client: httpx.Client, plan: Plan, report: Report) -> None:
    """A hold job on main, a second queued behind it: from the moment the
    first one's plugin ended (its own clock, in its result) to the second
    one's `started_at` (when it took the page). The first job's `finished_at`
    comes later still: it is when its end was stored, after the page was
    handed on."""
    gaps = []
    for _ in range(max(20, plan.c1_requests // 10)):
        first = start_job(client, HOLD)
        second = start_job(client, HOLD, **QUEUED)
        before, after = wait_done(client, first), wait_done(client, second)
        gaps.append((after["started_at"] - before["result"]["ended"]) * 1000)
    gap = Latency.of(gaps)
    report.add(Row("Dispatch: a queued job's start after the plugin before it on its page ended (its end → started_at)",
                   lat(gap), "", "", "p50 ≤ 5 ms", gap.p50 <= 5))


def drain(plan: Plan, report: Report, scratch: Path) -> None:
    """1,000 no-op jobs started on `any` with X-Queue-Timeout, as fast as one
    client sends them, to a worker with MAX_PAGES=8; jobs per second from the
    first start to the last end. Beside it, RQ's SimpleWorker draining as many
    no-op jobs enqueued the same way, from the first enqueue to the last result."""
    count = 1000 if plan.name == "full" else 200
    worker = WorkerProcess(scratch / "drain", env={
        "PENELOPE_PLUGINS": PLUGINS, "MAX_PAGES": str(DRAIN_PAGES), "QUEUE_MAX": str(count), "MAX_JOBS": str(count * 2),
    })
    try:
        worker.start()
        with worker.client() as client:
            began = time.time()
            jobs = []
            for _ in range(count):
                response = client.get(ANY_NOOP, headers=QUEUED)
                if response.status_code != 202:
                    raise RuntimeError(f"a drain start answered {response.status_code}: {response.text}")
                jobs.append(response.json()["job_id"])
            ended = max(wait_done(client, job_id)["finished_at"] for job_id in jobs)
        penelope = count / (ended - began)
    finally:
        worker.stop()
    peer = rq_drain(count, scratch)
    if peer is None:
        report.add(Row(f"Drain: {count:,} no-op jobs queued on any, MAX_PAGES={DRAIN_PAGES}", f"{penelope:,.0f} jobs/s",
                       "RQ skipped (pip install -r requirements/bench.txt, redis-server)"))
        return
    ratio = penelope / peer
    report.add(Row(f"Drain: {count:,} no-op jobs queued on any, MAX_PAGES={DRAIN_PAGES}, first start → last end",
                   f"{penelope:,.0f} jobs/s", f"RQ SimpleWorker {peer:,.0f} jobs/s", f"{ratio:.2f} ×",
                   "≥ 1.0 × RQ SimpleWorker", ratio >= 1.0))


def rq_drain(count: int, scratch: Path) -> float | None:
    """RQ's SimpleWorker (one, as Penelope is one worker) draining `count`
    no-op jobs enqueued one by one: jobs per second, or None without RQ."""
    try:
        import redis
        import rq

        from bench.peer import RedisServer, RQWorker
    except ImportError:
        return None
    if shutil.which("redis-server") is None:
        return None
    server = RedisServer(scratch / "redis-drain", free_port()).start()
    worker = RQWorker(server.url, "drain", "rq.worker.SimpleWorker", scratch / "rq-drain.log")
    try:
        worker.start()
        queue = rq.Queue("drain", connection=redis.Redis.from_url(server.url))
        queue.enqueue("bench.peer.noop").latest_result(timeout=60)  # the worker is up
        began = time.time()
        jobs = [queue.enqueue("bench.peer.noop") for _ in range(count)]
        while jobs[-1].latest_result() is None:  # one worker, in order: the last done means all are
            time.sleep(0.005)
        return count / (time.time() - began)
    finally:
        worker.stop()
        server.stop()
