"""The console on the waker (issue 45): what an operator waits for with 30
personas of 10,000 jobs each, every one asleep.

The stores are made as a busy day leaves them (bench/fleet_stores.py). A
real waker (`manage.py waker`) holds them as `sleepy` personas and never
starts one: the console reads each store with sqlite3, and the phase checks
at its end that no worker ran. One keep-alive client, signed in as a person
is (the sign-in form and its cookie) for the pages and with the waker's key
as Bearer for the search API, times each request to its last byte, c=1. The
requests take turns within a round, each round starting one further along,
so a drift of the machine's load falls on all of them alike; the first
rounds are a warm-up and are not counted.
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.fleet_stores import PLUGINS, SCHEDULES, make_store, template_store
from bench.phases.live import cpu_seconds
from bench.profiling import profiled
from bench.report import Plan, Report, Row, ms
from bench.stats import percentile
from harness.waker import WakerProcess

PERSONAS = 30
JOBS = 10_000
SEARCH_WITHIN_S = 2.0  # the issue: the search answers within 2 s for 30 personas of 10,000 jobs
WARMUP_ROUNDS = 5


@dataclass(frozen=True)
class Timed:
    """One request of a round: what it is, and how to make it (given the round)."""

    label: str
    request: Callable[[int], httpx.Response]
    search: bool = False
    finds: Callable[[int], bool] = lambda count: count > 0  # what a right answer's count is


def persona_name(n: int) -> str:
    return f"c{n:02d}"


def console_phase(plan: Plan, report: Report, scratch: Path, profile_dir: Path | None = None) -> None:
    rounds = 60 if plan.name == "full" else 15
    folder = scratch / "console"
    names = [persona_name(n) for n in range(1, PERSONAS + 1)]
    began = time.perf_counter()
    template = template_store(folder / "template")
    now = time.time()
    job_ids: list[tuple[str, str]] = []
    log_rows = 0
    for index, name in enumerate(names):
        filled = make_store(template, folder / name, jobs=JOBS, now=now, seed=index)
        job_ids += [(name, job_id) for job_id in filled.job_ids]
        log_rows += filled.log_rows
    stores = (f"{JOBS:,} jobs over the last day, {log_rows / PERSONAS:,.0f} request-log rows and {SCHEDULES} "
              f"schedules each; made in {time.perf_counter() - began:.1f} s")
    waker = WakerProcess(
        folder,
        [{"name": name, "mode": "sleepy", "env": {"PENELOPE_KEY": f"bench-{name}-key-0123456789abcdef"}} for name in names],
    )
    try:
        waker.start(timeout=60)
        with httpx.Client(base_url=waker.base_url, timeout=60) as client:
            signed_in = client.post("/console/sign-in", data={"key": waker.key, "next": "/console/"})
            if signed_in.status_code != 302 or not client.cookies:
                raise RuntimeError(f"the console's sign-in did not take the key: {signed_in.status_code}")
            with profiled(waker.process.pid, profile_dir, "console"):  # the waker, where the console runs
                timings = measure(client, requests(client, waker.key, names, job_ids, now), rounds, waker.process.pid)
        with waker.client() as api:
            personas = api.get("/personas").json()["personas"]
        # Never started: stopped with no exit on record, no worker process on
        # its store now, and no worker log in it (a worker's start writes one).
        asleep = (
            len(personas) == PERSONAS
            and all(each["state"] == "stopped" and each["last_exit"] is None for each in personas)
            and not waker.workers()
            and not any((waker.store(name) / "worker.log").exists() for name in names)
        )
    finally:
        left = waker.stop()
        shutil.rmtree(folder, ignore_errors=True)
    asleep = asleep and not left
    rows(report, timings, stores, asleep)


def requests(
    client: httpx.Client, key: str, names: list[str], job_ids: list[tuple[str, str]], now: float
) -> list[Timed]:
    bearer = {"Authorization": f"Bearer {key}"}
    pick = random.Random(45)

    def page(path: Callable[[int], str]) -> Callable[[int], httpx.Response]:
        return lambda n: client.get(path(n))

    def search(params: Callable[[int], dict[str, str]]) -> Callable[[int], httpx.Response]:
        return lambda n: client.get("/api/v1/fleet/jobs", params=params(n), headers=bearer)

    plugin = PLUGINS[0][0]
    jobs = "`GET /api/v1/fleet/jobs"
    return [
        Timed("`GET /console/`, the fleet page (signed in)", page(lambda n: "/console/")),
        Timed("`GET /console/?fragment=rows`, the fleet's refresh", page(lambda n: "/console/?fragment=rows")),
        Timed("`GET /console/p/<name>/`, a persona's page (each persona in turn)",
              page(lambda n: f"/console/p/{names[n % len(names)]}/")),
        Timed(f"{jobs}?job_id=<id>`, one job by its id", search(lambda n: {"job_id": pick.choice(job_ids)[1]}), True,
              lambda count: count == 1),
        Timed(f"{jobs}?plugin={plugin}&state=done`, a plugin and a common state",
              search(lambda n: {"plugin": plugin, "state": "done"}), True),
        Timed(f"{jobs}?plugin={plugin}&state=timed_out`, a plugin and a rare state",
              search(lambda n: {"plugin": plugin, "state": "timed_out"}), True),
        Timed(f"{jobs}?since=<3 h ago>&until=<2 h ago>`, an hour's jobs",
              search(lambda n: {"since": f"{now - 3 * 3600:.0f}", "until": f"{now - 2 * 3600:.0f}"}), True),
        Timed(f"{jobs}`, nothing given: the fleet's newest 100", search(lambda n: {}), True),
    ]


def measure(client: httpx.Client, timed: list[Timed], rounds: int, waker_pid: int) -> dict[str, dict[str, list[float]]]:
    """Each request's milliseconds to its last byte, the waker's CPU time
    over it (every thread's: the stores are read on threads), and for a
    search the time the waker says its reading took (`took_ms`). The CPU is
    what the request costs the host whatever else runs on it; the time to
    the last byte also holds the wait for a core."""
    figures = {each.label: {"ms": [], "cpu_ms": [], "took_ms": []} for each in timed}
    for n in range(WARMUP_ROUNDS + rounds):
        for turn in range(len(timed)):
            each = timed[(n + turn) % len(timed)]
            cpu_before, began = cpu_seconds([waker_pid]), time.perf_counter()
            response = each.request(n)
            elapsed, cpu = (time.perf_counter() - began) * 1000, (cpu_seconds([waker_pid]) - cpu_before) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"{each.label}: {response.status_code} {response.text[:500]}")
            if n < WARMUP_ROUNDS:
                continue
            figures[each.label]["ms"].append(elapsed)
            figures[each.label]["cpu_ms"].append(cpu)
            if each.search:
                body = response.json()
                if not each.finds(body["count"]):
                    raise RuntimeError(f"{each.label}: found {body['count']} jobs")
                figures[each.label]["took_ms"].append(body["took_ms"])
    return figures


def spread(timings: list[float]) -> str:
    ordered = sorted(timings)
    return (f"p50 {ms(percentile(ordered, 50))}, p95 {ms(percentile(ordered, 95))}, max {ms(ordered[-1])} "
            f"(n={len(ordered)})")


def rows(report: Report, timings: dict[str, dict[str, list[float]]], stores: str, asleep: bool) -> None:
    fleet = f"Console, {PERSONAS} sleeping personas × {JOBS:,} jobs"
    report.add(Row(f"{fleet}: the stores", stores, "", "", ""))
    for label, figures in timings.items():
        took, cpu = figures["took_ms"], f"the waker's CPU: mean {ms(statistics.fmean(figures['cpu_ms']))} a request"
        if not took:
            report.add(Row(f"{fleet}: {label}", spread(figures["ms"]), cpu, "", "(no target)"))
            continue
        report.add(Row(
            f"{fleet}: {label}", spread(figures["ms"]),
            f"{cpu}; the stores' reading alone (`took_ms`): p50 {ms(percentile(sorted(took), 50))}", "",
            f"every answer within {SEARCH_WITHIN_S:g} s", max(figures["ms"]) <= SEARCH_WITHIN_S * 1000,
        ))
    report.add(Row(f"{fleet}: workers started while the console read their stores",
                   "none" if asleep else "**a worker ran**", "", "", "none", asleep))
