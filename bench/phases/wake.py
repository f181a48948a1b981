"""How fast a sleeping persona wakes (issue 46): through a real waker, one
sleepy persona on an otherwise idle host, stopped and then asked for a demo
page, `ROUNDS` times. The whole (the request's time to its answer) and its
parts: the worker's own start, part by part, as its log line says it
(core/start_clock.py), the waker's share (its spawn and its health polls),
and the first call itself."""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

from bench.phases.personas import OPEN
from bench.report import Plan, Report, Row, ms
from bench.worker_calls import PLUGINS
from harness.waker import WakerProcess

ROUNDS = 15
NAME = "sleeper"
STARTED = re.compile(r"worker started in ([\d.]+) s: (.*)$")
PART = re.compile(r"(.+?) ([\d.]+) s$")


def wake_phase(plan: Plan, report: Report, scratch: Path) -> None:
    rounds = ROUNDS if plan.name == "full" else 3
    waker = WakerProcess(
        scratch / "wake", [{"name": NAME, "mode": "sleepy", "idle_timeout_s": 3600}],
        env={"PENELOPE_PLUGINS": PLUGINS, "WAKER_POLL_S": "1"},
    )
    totals, starts, parts = [], [], []
    try:
        waker.start(timeout=60)
        for _ in range(rounds + 1):  # the first one makes the store: not a wake of an existing persona
            with waker.client() as api:
                api.post(f"/personas/{NAME}/stop", json={"force": True}).raise_for_status()
            with waker.through(NAME, timeout=120) as client:
                began = time.perf_counter()
                answer = client.get(OPEN)
                totals.append(time.perf_counter() - began)
            assert answer.status_code == 200, answer.text
            started, named = last_start(waker.store(NAME) / "worker.log")
            starts.append(started)
            parts.append(named)
    finally:
        waker.stop(timeout=60)
    totals, starts, parts = totals[1:], starts[1:], parts[1:]
    total = statistics.median(totals)
    worker = statistics.median(starts)
    report.add(Row(
        "A cold request to a sleeping persona through the waker, to its answer (one persona, an idle host)",
        f"p50 {ms(total * 1000)}, max {ms(max(totals) * 1000)} (n={len(totals)})", "", "", "p50 ≤ 1.0 s", total <= 1.0,
    ))
    medians = {name: statistics.median(each[name] for each in parts) for name in parts[0]}
    report.add(Row(
        "  its parts (p50): the worker's start, as its log says",
        f"{ms(worker * 1000)}: " + ", ".join(f"{name} {ms(seconds * 1000)}" for name, seconds in medians.items()),
    ))
    report.add(Row("  its parts (p50): the rest (the waker's spawn and health polls, the first call)",
                   ms((total - worker) * 1000)))


def last_start(log: Path) -> tuple[float, dict[str, float]]:
    """The worker's last `started in` line: its total and its parts, in seconds."""
    line = next(line for line in reversed(log.read_text().splitlines()) if STARTED.search(line))
    found = STARTED.search(line)
    parts = {}
    for part in found.group(2).split("; "):
        name, seconds = PART.match(part).groups()
        parts[name] = float(seconds)
    return float(found.group(1)), parts
