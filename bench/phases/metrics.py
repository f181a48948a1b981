"""What the metrics cost a request: two fresh workers side by side, one with
METRICS_ENABLED=0, and what one scrape takes."""

from __future__ import annotations

import statistics
from pathlib import Path

from bench import load
from bench.report import Plan, Report, Row, lat, ms, rate
from bench.stats import Latency, Throughput
from bench.worker_calls import PLUGINS, REFERENCE_ROUTE
from harness.worker import WorkerProcess

METRICS_PAIRS_PER_ROUND = 4  # of the plan's throughput rounds
METRICS_ROUND_S = 3
METRICS_SIDES = {"on": "1", "off": "0"}  # METRICS_ENABLED


def metrics_phase(plan: Plan, report: Report, client_name: str, scratch: Path) -> None:
    """What the metrics cost a request: the reference on two fresh workers
    side by side, one with the metrics on (the default), one with
    METRICS_ENABLED=0. At c=1 one request to each in turn, and at c=32 wrk
    rounds in pairs, each pair's order swapped from the last; the ratio is the
    median over the pairs of the on round's p50 over the off round's. Two
    sessions, the workers started in one order, then anew in the other: of two
    identical workers side by side, the one started first took 4 to 11 % more
    CPU per request here, which would otherwise pass for the metrics' cost.
    Then what one scrape takes."""
    timings: dict[str, list[float]] = {"on": [], "off": []}
    rounds: dict[str, list[Throughput]] = {"on": [], "off": []}
    scrapes: list[float] = []
    for session, order in enumerate((("on", "off"), ("off", "on"))):
        workers: dict[str, WorkerProcess] = {}
        try:
            for side in order:
                workers[side] = WorkerProcess(scratch / f"metrics-{side}-{session}",
                                              env={"PENELOPE_PLUGINS": PLUGINS, "METRICS_ENABLED": METRICS_SIDES[side]})
                workers[side].start()
            clients = {side: workers[side].client() for side in order}
            try:
                assert clients["off"].get("/metrics").status_code == 404, "METRICS_ENABLED=0 should switch the route off"
                for client in clients.values():
                    for _ in range(plan.warmup):
                        client.get(REFERENCE_ROUTE).raise_for_status()
                for n in range(plan.c1_requests // 2):
                    for side in order if n % 2 else order[::-1]:
                        elapsed, response = load.timed_ms(lambda client=clients[side]: client.get(REFERENCE_ROUTE))
                        assert response.status_code == 200, response.text
                        timings[side].append(elapsed)
                # Short rounds and many pairs: the effect sought is a few per
                # cent, less than a shared machine's load moves within a long round.
                for n in range(METRICS_PAIRS_PER_ROUND * plan.throughput_rounds // 2):
                    for side in order if n % 2 else order[::-1]:
                        url = workers[side].base_url + "/api/v1" + REFERENCE_ROUTE
                        rounds[side].append(load.throughput(url, workers[side].key, concurrency=plan.concurrency,
                                                            seconds=min(plan.throughput_seconds, METRICS_ROUND_S),
                                                            client=client_name))
                for _ in range(plan.warmup // 2):
                    elapsed, response = load.timed_ms(lambda client=clients["on"]: client.get("/metrics"))
                    assert response.status_code == 200, response.text
                    scrapes.append(elapsed)
            finally:
                for client in clients.values():
                    client.close()
        finally:
            for each in workers.values():
                each.stop()
    on_c1, off_c1 = Latency.of(timings["on"]), Latency.of(timings["off"])
    report.add(Row("GET /api/v1/main with metrics on, c=1", lat(on_c1), f"metrics off p50 {ms(off_c1.p50)}",
                   f"{on_c1.p50 / off_c1.p50:.3f} ×", "(no target)"))
    ratios = sorted(a.p50 / b.p50 for a, b in zip(rounds["on"], rounds["off"], strict=True))
    ratio = statistics.median(ratios)
    median = {side: sorted(rounds[side], key=lambda r: r.p50)[len(rounds[side]) // 2] for side in rounds}
    errors = sum(r.errors for r in rounds["on"])
    report.add(Row(
        f"GET /api/v1/main with metrics on, c={plan.concurrency} (median round)", rate(median["on"]),
        f"metrics off (METRICS_ENABLED=0): p50 {ms(median['off'].p50)}, {median['off'].rps:,.0f} req/s",
        f"p50 {ratio:.3f} × (median of {len(ratios)} pairs: " + ", ".join(f"{r:.2f}" for r in ratios) + ")",
        "p50 ≤ 1.03 × metrics off, 0 errors", ratio <= 1.03 and errors == 0,
    ))
    report.add(Row("A scrape: GET /api/v1/metrics, c=1", lat(Latency.of(scrapes)), "", "", "(no target)"))
