"""Jobs against the stack's own limit and against a peer, in one run.

    python -m bench.run [--quick] [--out PATH] [--only PHASE,...] [--profile DIR]

Starts a real worker (`manage.py serve`: daphne, real Chromium) on loopback
with a throwaway store, measures what a user of an async-job API pays (a job's
start, a poll, a webhook, the same plugin run plainly and as a job, restart
recovery, sweeps, memory, what the metrics cost a request), each beside its
reference measured in the same run, then RQ on a Redis server as the peer.
Prints a table and writes it, with the machine, versions and date, to
docs/BENCHMARKS.md between the generated-block markers (a full run; `--quick`
only prints unless given `--out`).

Asserts nothing: a benchmark prints figures. `scripts/bench.sh` sets up the
machine and runs this.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import load
from bench.memory import Memory
from bench.profiling import profiled
from bench.stats import Latency, Throughput
from harness.receiver import Receiver
from harness.worker import WorkerProcess, free_port, wait_until

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- bench:begin (written by python -m bench.run) -->", "<!-- bench:end -->"
PLUGINS = "plugins.web,plugins.demo,bench.plugins"
REFERENCE_ROUTE = "/main"  # GET /api/v1/main: a page's state, in memory, no database
NOOP = "/main/plugin/bench/noop"
HOLD = "/main/plugin/bench/hold"
POLL_TTL_S = "5"  # short, so a thousand finished jobs never fill MAX_JOBS


@dataclass(frozen=True)
class Plan:
    name: str
    c1_requests: int  # reference requests and job starts, alternating, at c=1
    warmup: int
    throughput_rounds: int
    throughput_seconds: float
    concurrency: int
    webhooks: int
    plugin_runs: int  # each of plain, webhook job, polling job
    plugin_limit: int
    plugin_pause_ms: int
    store_jobs: int  # recovery and sweep
    peer_trips: int
    restarts: int  # of each kind


QUICK = Plan("quick", 200, 30, 2, 3, 32, 30, 1, 100, 100, 1000, 50, 1)
FULL = Plan("full", 1000, 100, 5, 8, 32, 300, 7, 100, 100, 1000, 300, 3)


@dataclass
class Row:
    measurement: str
    result: str
    reference: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None


@dataclass
class Report:
    plan: Plan
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(f"  {row.measurement}: {row.result}" + (f"  ({row.ratio} vs {row.reference})" if row.ratio else ""),
              flush=True)


def ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"


def lat(latency: Latency) -> str:
    return f"p50 {ms(latency.p50)}, p99 {ms(latency.p99)} (n={latency.count})"


def rate(figures: Throughput) -> str:
    return (f"{figures.rps:,.0f} req/s, p50 {ms(figures.p50)}, p99 {ms(figures.p99)}, "
            f"{figures.errors} errors ({figures.requests:,} requests)")


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: ""}[met]


# --- phases on the main worker ----------------------------------------------------


def start_job(client: httpx.Client, path: str = NOOP, **headers: str) -> str:
    response = client.get(path, headers=headers or {"X-Result-Ttl": POLL_TTL_S})
    if response.status_code != 202:
        raise RuntimeError(f"a job start answered {response.status_code}: {response.text}")
    return response.json()["job_id"]


def wait_done(client: httpx.Client, job_id: str, pause_s: float = 0.0, timeout_s: float = 300) -> dict:
    """Poll until the job has ended; its body."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get(f"/jobs/{job_id}")
        if response.status_code != 200:
            raise RuntimeError(f"a poll of job {job_id} answered {response.status_code}: {response.text}")
        body = response.json()
        if body["state"] != "running":
            return body
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job_id} still runs after {timeout_s} s")
        if pause_s:
            time.sleep(pause_s)


def warm_up(client: httpx.Client, plan: Plan) -> None:
    for _ in range(plan.warmup):
        client.get(REFERENCE_ROUTE).raise_for_status()
        wait_done(client, start_job(client))


def c1_phase(client: httpx.Client, plan: Plan, report: Report) -> Latency:
    """The reference and the job start, alternating, one request at a time.

    The job is `bench/hold`, which works the page 20 ms: like any real plugin
    it is still running when its 202 goes out, so the 202 is timed alone. A
    no-op job runs its whole life (its end, its store write) while its own 202
    is on the way, so it is shown apart, for what it is.
    """
    reference, starts, noop_reference, noop_starts = [], [], [], []
    for n in range(plan.c1_requests):
        elapsed, response = load.timed_ms(lambda: client.get(REFERENCE_ROUTE))
        assert response.status_code == 200, response.text
        reference.append(elapsed)
        elapsed, job_id = load.timed_ms(lambda: start_job(client, HOLD))
        starts.append(elapsed)
        wait_done(client, job_id)  # the page is free again for the next start; not timed
        if n % 4 == 0:  # a quarter as many no-op starts, against their own reference
            elapsed, response = load.timed_ms(lambda: client.get(REFERENCE_ROUTE))
            noop_reference.append(elapsed)
            elapsed, job_id = load.timed_ms(lambda: start_job(client, NOOP))
            noop_starts.append(elapsed)
            wait_done(client, job_id)
    ref, start = Latency.of(reference), Latency.of(starts)
    report.add(Row("Reference: GET /api/v1/main, c=1", lat(ref)))
    ratio = start.p50 / ref.p50
    report.add(Row("Job start (the 202) of `bench/hold`, a job that runs on past its 202, c=1", lat(start),
                   f"reference p50 {ms(ref.p50)}", f"{ratio:.2f} ×", "p50 ≤ 1.5 × reference", ratio <= 1.5))
    noop_ref, noop_start = Latency.of(noop_reference), Latency.of(noop_starts)
    report.add(Row("Job start (the 202) of `bench/noop`, a job that ends before its 202 is out, c=1", lat(noop_start),
                   f"reference p50 {ms(noop_ref.p50)}", f"{noop_start.p50 / noop_ref.p50:.2f} ×", "(no target)"))
    return ref


@dataclass
class PairedRounds:
    """Throughput rounds of a reference and a candidate, alternating. The
    ratio is the median of each candidate round over the reference round just
    before it, so a load that drifts over the phase (a shared machine's)
    cancels out; the rounds shown are each side's median."""

    ratios: list[float]
    reference: Throughput
    candidate: Throughput
    errors: int  # the candidate's, in all rounds

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @classmethod
    def run(cls, key: str, plan: Plan, client_name: str, *, reference: str, candidate: str) -> PairedRounds:
        rounds: dict[str, list[Throughput]] = {reference: [], candidate: []}
        for _ in range(plan.throughput_rounds):
            for url in (reference, candidate):
                rounds[url].append(load.throughput(url, key, concurrency=plan.concurrency,
                                                   seconds=plan.throughput_seconds, client=client_name))
        ratios = sorted(c.rps / r.rps for r, c in zip(rounds[reference], rounds[candidate], strict=True))
        median = [sorted(rounds[url], key=lambda r: r.rps)[len(rounds[url]) // 2] for url in (reference, candidate)]
        return cls(ratios, median[0], median[1], sum(r.errors for r in rounds[candidate]))


def throughput_phase(worker: WorkerProcess, client: httpx.Client, plan: Plan, report: Report, client_name: str) -> None:
    """Polls of one finished job against the reference, in alternating rounds
    from the same client. The ratio is the median of each poll round's
    throughput over the reference round just before it, so a load that
    drifts over the phase (a shared machine's) cancels out."""
    job_id = start_job(client, NOOP, **{"X-Result-Ttl": "600"})
    assert wait_done(client, job_id)["state"] == "done"
    api = worker.base_url + "/api/v1"
    paired = PairedRounds.run(worker.key, plan, client_name, reference=api + REFERENCE_ROUTE, candidate=f"{api}/jobs/{job_id}")
    ratios, ratio, ref, poll, errors = paired.ratios, paired.ratio, paired.reference, paired.candidate, paired.errors
    c = plan.concurrency
    report.add(Row(f"Reference: GET /api/v1/main, c={c} (median round)", rate(ref)))
    shown = rate(poll) if errors == poll.errors else rate(poll) + f"; {errors} errors in all rounds"
    report.add(Row(f"Poll of a finished job, c={c} (median round)", shown, f"reference {ref.rps:,.0f} req/s",
                   f"{ratio:.2f} × (median of {len(ratios)} paired rounds: "
                   + ", ".join(f"{r:.2f}" for r in ratios) + ")",
                   "≥ 0.7 × reference, 0 errors", ratio >= 0.7 and errors == 0))


def floor_phase(worker: WorkerProcess, client: httpx.Client, plan: Plan, report: Report, client_name: str) -> None:
    """The cheapest authenticated route against the bare stack (bench/floor.py):
    alternating at c=1, and in alternating rounds at c=32, like every pair."""
    with Floor(worker.key) as floor, httpx.Client(base_url=floor.url + "/api/v1",
                                                 headers={"Authorization": f"Bearer {worker.key}"}) as bare:
        for _ in range(plan.warmup):
            bare.get(REFERENCE_ROUTE).raise_for_status()
        reference, floors = [], []
        for _ in range(plan.c1_requests):
            elapsed, response = load.timed_ms(lambda: bare.get(REFERENCE_ROUTE))
            assert response.status_code == 200, response.text
            floors.append(elapsed)
            elapsed, response = load.timed_ms(lambda: client.get(REFERENCE_ROUTE))
            assert response.status_code == 200, response.text
            reference.append(elapsed)
        bare_c1, ref_c1 = Latency.of(floors), Latency.of(reference)
        report.add(Row("Floor: a bare async Django view with a bearer check under daphne, c=1", lat(bare_c1)))
        ratio = ref_c1.p50 / bare_c1.p50
        report.add(Row("GET /api/v1/main against the floor, c=1", lat(ref_c1), f"floor p50 {ms(bare_c1.p50)}",
                       f"{ratio:.2f} ×", "p50 ≤ 1.4 × floor", ratio <= 1.4))
        paired = PairedRounds.run(worker.key, plan, client_name, reference=floor.url + "/api/v1" + REFERENCE_ROUTE,
                                  candidate=worker.base_url + "/api/v1" + REFERENCE_ROUTE)
    ratios, ratio, bare, ref, errors = paired.ratios, paired.ratio, paired.reference, paired.candidate, paired.errors
    c = plan.concurrency
    report.add(Row(f"Floor, c={c} (median round)", rate(bare)))
    report.add(Row(f"GET /api/v1/main against the floor, c={c} (median round)", rate(ref), f"floor {bare.rps:,.0f} req/s",
                   f"{ratio:.2f} × (median of {len(ratios)} paired rounds: " + ", ".join(f"{r:.2f}" for r in ratios) + ")",
                   "≥ 0.6 × floor, 0 errors", ratio >= 0.6 and errors == 0))


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


class Floor:
    """bench/floor.py in a process of its own, on a free loopback port."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Floor:
        env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
        self.process = subprocess.Popen([sys.executable, "-m", "bench.floor", str(self.port), self.key], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout.readline().strip() == "ready", "the floor did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def webhook_phase(client: httpx.Client, plan: Plan, report: Report) -> None:
    """From the job's `finished_at` to the receiver holding the body."""
    delays = []
    with Receiver() as receiver:
        for n in range(plan.webhooks):
            path = f"/200/hook{n}"
            start_job(client, NOOP, **{"X-Callback-Url": receiver.url + path})
            hit = wait_until(lambda path=path: receiver.received(path), timeout=30, interval=0.0005,
                             what="the webhook")[0]
            delays.append((hit.at - json.loads(hit.body)["finished_at"]) * 1000)
            wait_until(lambda: client.get("/main").json()["job_id"] is None, what="page main to be free")
    latency = Latency.of(delays)
    report.add(Row("Webhook: finished_at → receiver holds the body", lat(latency), "", "",
                   "p50 ≤ 20 ms, p99 ≤ 100 ms", latency.p50 <= 20 and latency.p99 <= 100))


def plugin_phase(client: httpx.Client, plan: Plan, report: Report) -> None:
    """demo/get-following with a fixed limit: a plain call, a webhook job and a
    polling job, in turn, end to end as the client sees them."""
    query = f"?handle=alice&limit={plan.plugin_limit}&pause_ms={plan.plugin_pause_ms}"
    path = "/main/plugin/demo/get-following" + query
    runs: dict[str, list[float]] = {"plain": [], "webhook": [], "poll": []}
    poll_every_s = 0.05
    with Receiver() as receiver:
        for n in range(plan.plugin_runs + 1):  # the first round warms the page and the site up
            began = time.time()
            response = client.get(path)
            assert response.status_code == 200 and response.json()["count"] == plan.plugin_limit, response.text
            plain_s = time.time() - began

            hook = f"/200/following{n}"
            began = time.time()
            start_job(client, path, **{"X-Callback-Url": receiver.url + hook})
            hit = wait_until(lambda hook=hook: receiver.received(hook), timeout=120, interval=0.001,
                             what="the webhook")[0]
            assert json.loads(hit.body)["result"]["count"] == plan.plugin_limit
            webhook_s = hit.at - began
            wait_until(lambda: client.get("/main").json()["job_id"] is None, what="page main to be free")

            began = time.time()
            job_id = start_job(client, path, **{"X-Result-Ttl": "60"})
            body = wait_done(client, job_id, pause_s=poll_every_s)
            assert body["result"]["count"] == plan.plugin_limit
            poll_s = time.time() - began
            if n:
                runs["plain"].append(plain_s * 1000)
                runs["webhook"].append(webhook_s * 1000)
                runs["poll"].append(poll_s * 1000)
    plain, webhook, poll = (Latency.of(runs[name]) for name in ("plain", "webhook", "poll"))
    name = f"demo/get-following limit={plan.plugin_limit} pause_ms={plan.plugin_pause_ms}"
    report.add(Row(f"Plain call, {name}", lat(plain)))
    ratio = webhook.p50 / plain.p50
    report.add(Row("Same as a webhook job: start → receiver holds the result", lat(webhook),
                   f"plain p50 {ms(plain.p50)}", f"{ratio:.3f} ×", "≤ 1.05 × plain", ratio <= 1.05))
    ratio = poll.p50 / plain.p50
    report.add(Row(f"Same as a polling job: start → poll sees done (a poll every {poll_every_s * 1000:.0f} ms)",
                   lat(poll), f"plain p50 {ms(plain.p50)}", f"{ratio:.3f} ×", "≤ 1.05 × plain", ratio <= 1.05))


def peer_phase(client: httpx.Client, plan: Plan, report: Report, scratch: Path) -> None:
    """A no-op job's round trip at c=1: Penelope (202 → a poll sees done)
    against RQ (enqueue → its result is there), each asking again at once."""
    try:
        import redis
        import rq

        from bench.peer import RedisServer, RQWorker, round_trip_ms
    except ImportError as missing:
        report.add(Row("Peer: RQ + Redis", f"skipped: {missing} (pip install -r requirements/bench.txt)"))
        return
    if shutil.which("redis-server") is None:
        report.add(Row("Peer: RQ + Redis", "skipped: redis-server is not installed (scripts/bench.sh installs it)"))
        return
    server = RedisServer(scratch / "redis", free_port()).start()
    workers = [
        RQWorker(server.url, "fork", "rq.worker.Worker", scratch / "rq-fork.log"),
        RQWorker(server.url, "simple", "rq.worker.SimpleWorker", scratch / "rq-simple.log"),
    ]
    try:
        report.versions["redis-server"] = server.version()
        for worker in workers:
            worker.start()
        connection = redis.Redis.from_url(server.url)
        queues = {worker.queue: rq.Queue(worker.queue, connection=connection) for worker in workers}
        for queue in queues.values():  # the workers are up once they answer
            queue.enqueue("bench.peer.noop").latest_result(timeout=60)

        def penelope_trip() -> float:
            elapsed, _ = load.timed_ms(lambda: wait_done(client, start_job(client)))
            return elapsed

        def long_poll_trip() -> float:
            elapsed, _ = load.timed_ms(lambda: long_poll_done(client, start_job(client)))
            return elapsed

        trips: dict[str, list[float]] = {"penelope": [], "long-poll": [], "fork": [], "simple": []}
        for n in range(plan.peer_trips + 10):
            figures = {"penelope": penelope_trip(), "long-poll": long_poll_trip(), "fork": round_trip_ms(queues["fork"]),
                       "simple": round_trip_ms(queues["simple"])}
            if n >= 10:
                for name, value in figures.items():
                    trips[name].append(value)
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
    penelope, long_poll, fork, simple = (Latency.of(trips[name]) for name in ("penelope", "long-poll", "fork", "simple"))
    report.add(Row("Penelope no-op job round trip: 202 → a poll sees done, c=1", lat(penelope)))
    ratio = long_poll.p50 / simple.p50
    report.add(Row("Penelope no-op job round trip with a long-poll: 202 → `?wait=10` answers done, c=1", lat(long_poll),
                   f"RQ SimpleWorker p50 {ms(simple.p50)}", f"{ratio:.2f} ×", "p50 ≤ 1.0 × RQ SimpleWorker", ratio <= 1.0))
    report.add(Row("Peer: RQ `rq worker` (forks a work horse per job): enqueue → result, c=1", lat(fork),
                   f"Penelope p50 {ms(penelope.p50)}", f"Penelope / RQ = {penelope.p50 / fork.p50:.2f} ×", "report the ratio"))
    report.add(Row("Peer: RQ `SimpleWorker` (no fork): enqueue → result, c=1", lat(simple),
                   f"Penelope p50 {ms(penelope.p50)}", f"Penelope / RQ = {penelope.p50 / simple.p50:.2f} ×", "report the ratio"))


def long_poll_done(client: httpx.Client, job_id: str) -> dict:
    """Long-poll until the job has ended (one request, unless it runs past 10 s); its body."""
    while True:
        response = client.get(f"/jobs/{job_id}", params={"wait": "10"})
        if response.status_code != 200:
            raise RuntimeError(f"a long-poll of job {job_id} answered {response.status_code}: {response.text}")
        if response.json()["state"] != "running":
            return response.json()


def events_phase(worker: WorkerProcess, client: httpx.Client, plan: Plan, report: Report) -> None:
    """A job's end to a WebSocket client holding `job.ended`, and a cancel of a
    plugin waiting in the browser to its answer."""
    from websockets.sync.client import connect

    delays = []
    url = f"ws://127.0.0.1:{worker.port}/api/v1/events?page=main"
    with connect(url, additional_headers={"Authorization": f"Bearer {worker.key}"}) as events:
        for n in range(plan.webhooks + 10):
            job_id = start_job(client, NOOP)
            while True:
                event = json.loads(events.recv(timeout=30))
                if event["event"] == "job.ended" and event["job_id"] == job_id:
                    held_at = time.time()
                    break
            if n >= 10:
                delays.append((held_at - event["job"]["finished_at"]) * 1000)
            wait_until(lambda: client.get("/main").json()["job_id"] is None, what="page main to be free")
    latency = Latency.of(delays)
    report.add(Row("Event socket: a job's finished_at → the client holds `job.ended`", lat(latency), "", "",
                   "p50 ≤ 5 ms, p99 ≤ 50 ms", latency.p50 <= 5 and latency.p99 <= 50))

    cancels = []
    for _ in range(plan.webhooks // 6 + 5):
        job_id = start_job(client, "/main/plugin/bench/browser-wait", **{"X-Result-Ttl": POLL_TTL_S})
        # Well inside the browser call: the page shows the job, and its first poll is answered.
        wait_until(lambda job_id=job_id: client.get("/main").json()["job_id"] == job_id, what="the job on page main")
        elapsed, response = load.timed_ms(lambda job_id=job_id: client.post(f"/jobs/{job_id}/cancel"))
        if response.status_code != 200 or response.json()["state"] != "cancelled":
            raise RuntimeError(f"a cancel answered {response.status_code}: {response.text}")
        cancels.append(elapsed)
    latency = Latency.of(cancels)
    report.add(Row("Cancel of a plugin waiting in the browser (`page.wait_for_timeout(60000)`) → the answer, c=1",
                   lat(latency), "", "", "p50 ≤ 100 ms", latency.p50 <= 100))


def max_pages_memory(worker: WorkerProcess, client: httpx.Client) -> tuple[Memory, int]:
    """Open pages up to MAX_PAGES, each showing a demo profile; measure; close them."""
    max_pages = client.get("/pages").json()["max_pages"]
    opened = [f"bench{n}" for n in range(1, max_pages)]
    for page_id in opened:
        client.post("/pages", json={"page_id": page_id}).raise_for_status()
    for page_id in ["main", *opened]:
        response = client.get(f"/{page_id}/plugin/demo/open-account?handle=alice")
        assert response.status_code == 200, response.text
    time.sleep(1)
    memory = Memory.of(worker.process.pid)
    for page_id in opened:
        client.delete(f"/{page_id}").raise_for_status()
    return memory, max_pages


def memory_rows(report: Report, idle: Memory, pages: Memory, max_pages: int, after: Memory, jobs: int) -> None:
    for who, before, full, later in (
        ("Worker process RSS", idle.worker_mb, pages.worker_mb, after.worker_mb),
        ("Browser RSS (sum over its processes)", idle.browser_mb, pages.browser_mb, after.browser_mb),
    ):
        growth = later / before - 1
        report.add(Row(
            who,
            f"idle {before:.0f} MB; after {jobs:,} more jobs {later:.0f} MB; then with {max_pages} pages open {full:.0f} MB",
            f"idle {before:.0f} MB", f"{growth:+.1%}", "growth after the jobs ≤ 10 %", growth <= 0.10,
        ))


# --- phases on their own stores ---------------------------------------------------


def store_op(operation: str, store: Path, jobs: int) -> dict:
    finished = subprocess.run(
        [sys.executable, "-m", "bench.store_ops", operation, "--jobs", str(jobs)],
        cwd=ROOT, env={**os.environ, "PENELOPE_STORE": str(store), "PENELOPE_LOG_LEVEL": "WARNING"},
        capture_output=True, text=True, check=True, timeout=600,
    )
    return json.loads(finished.stdout.strip().splitlines()[-1])


def start_s(store: Path, running_jobs: int) -> float:
    """Seconds from `serve` to its first healthy answer on a new store, with
    `running_jobs` jobs caught running in it (recovered before the port opens)."""
    if running_jobs:
        store_op("running", store, running_jobs)
    worker = WorkerProcess(store, env={"PENELOPE_PLUGINS": PLUGINS})
    began = time.perf_counter()
    worker.start()
    elapsed = time.perf_counter() - began
    try:
        if running_jobs:
            logged = re.search(r"recovery: (\d+) jobs interrupted", worker.log())
            with worker.client() as client:
                held = client.get(f"/jobs/{0:016x}").json()
            assert logged and int(logged.group(1)) == running_jobs and held["state"] == "interrupted", (logged, held)
    finally:
        worker.stop()
    return elapsed


def store_phase(plan: Plan, report: Report, scratch: Path) -> None:
    recovered = store_op("recovery", scratch / "recovery", plan.store_jobs)
    report.add(Row(f"Recovery of {recovered['interrupted']:,} running jobs (jobs.service.recover)",
                   f"{recovered['seconds'] * 1000:.0f} ms", "", "", "≤ 1 s", recovered["seconds"] <= 1))
    swept = store_op("sweep", scratch / "sweep", plan.store_jobs)
    files = swept["files_on_disk_before"] - swept["files_on_disk_after"]
    report.add(Row(f"Sweep of {swept['jobs']:,} expired jobs and {files:,} files (jobs.service.sweep)",
                   f"{swept['seconds'] * 1000:.0f} ms", "", "", "≤ 2 s", swept["seconds"] <= 2))
    longest = max(recovered["longest_transaction_s"], swept["longest_transaction_s"])
    report.add(Row("Longest write transaction of recovery and sweep (one batch of 100 rows)",
                   f"{longest * 1000:.1f} ms", "", "", "≤ 50 ms", longest <= 0.05))
    # Real restarts, in turn: an empty store, then one with that many jobs caught running.
    starts: dict[int, list[float]] = {0: [], plan.store_jobs: []}
    for n in range(plan.restarts):
        for jobs in starts:
            starts[jobs].append(start_s(scratch / f"restart-{jobs}-{n}", jobs) * 1000)
    empty, loaded = Latency.of(starts[0]), Latency.of(starts[plan.store_jobs])
    report.add(Row(f"Restart: `serve` to healthy with {plan.store_jobs:,} jobs caught running (browser launch included)",
                   f"p50 {ms(loaded.p50)} (n={loaded.count})", f"an empty store: p50 {ms(empty.p50)}",
                   f"{loaded.p50 - empty.p50:+.0f} ms", "(no target)"))


# --- the run ----------------------------------------------------------------------------


def versions(worker: WorkerProcess) -> dict[str, str]:
    found = {"Python": platform.python_version()}
    for package in ("Django", "daphne", "Twisted", "playwright", "httpx", "rq", "redis"):
        try:
            found[package if package != "redis" else "redis-py"] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    executable = re.search(r"browser started: (\S+)", worker.log())
    if executable:
        try:
            found["Chromium"] = subprocess.run([executable.group(1), "--version"], capture_output=True, text=True,
                                               timeout=30, check=False).stdout.strip()
        except OSError:
            pass
    if shutil.which("wrk"):
        banner = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
        found["wrk"] = banner.split(" [")[0].removeprefix("wrk ")
    return found


def machine() -> dict[str, str]:
    meminfo = Path("/proc/meminfo").read_text()
    total_kb = int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1))
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"model name\s*:\s*(.+)", cpuinfo)
    return {
        "cores": str(os.cpu_count()),
        "memory": f"{total_kb / 1024 / 1024:.1f} GiB",
        "cpu": model.group(1).strip() if model else platform.processor(),
        "system": f"{platform.system()} {platform.release()}",
    }


PHASES = ("c1", "throughput", "floor", "metrics", "webhook", "events", "plugin", "peer", "memory", "store")


def run(plan: Plan, profile_dir: Path | None, phases: tuple[str, ...] = PHASES) -> Report:
    report = Report(plan)
    client_name = load.load_client()
    scratch = Path(tempfile.mkdtemp(prefix="penelope-bench-"))
    load_before = os.getloadavg()
    began = time.time()
    worker = WorkerProcess(scratch / "store", env={"PENELOPE_PLUGINS": PLUGINS})
    try:
        print(f"[{plan.name}] starting a worker (serve, daphne, Chromium) on loopback, store {scratch}", flush=True)
        worker.start()
        report.versions = versions(worker)
        pid = worker.process.pid
        with worker.client() as client:
            print("warm-up; memory idle", flush=True)
            warm_up(client, plan)
            time.sleep(1)
            idle = Memory.of(pid)
            if "c1" in phases or "memory" in phases:
                print("c=1: reference and job starts", flush=True)
                with profiled(pid, profile_dir, "c1"):
                    c1_phase(client, plan, report)
                time.sleep(1)
                after_jobs = Memory.of(pid)
            if "throughput" in phases:
                print(f"c={plan.concurrency}: reference and polls ({client_name})", flush=True)
                with profiled(pid, profile_dir, "throughput"):
                    throughput_phase(worker, client, plan, report, client_name)
            if "floor" in phases:
                print(f"the bare-stack floor, c=1 and c={plan.concurrency} ({client_name})", flush=True)
                with profiled(pid, profile_dir, "floor"):
                    floor_phase(worker, client, plan, report, client_name)
            if "metrics" in phases:
                print(f"metrics on against off, c=1 and c={plan.concurrency} ({client_name})", flush=True)
                metrics_phase(plan, report, client_name, scratch)  # on workers of its own
            if "webhook" in phases:
                print("webhooks", flush=True)
                with profiled(pid, profile_dir, "webhook"):
                    webhook_phase(client, plan, report)
            if "events" in phases:
                print("the event socket and cancel", flush=True)
                with profiled(pid, profile_dir, "events"):
                    events_phase(worker, client, plan, report)
            if "plugin" in phases:
                print("a plugin run: plain and as jobs", flush=True)
                with profiled(pid, profile_dir, "plugin"):
                    plugin_phase(client, plan, report)
            if "peer" in phases:
                print("the peer: RQ and Redis", flush=True)
                with profiled(pid, profile_dir, "peer"):
                    peer_phase(client, plan, report, scratch)
            if "memory" in phases:
                print("memory with MAX_PAGES pages open", flush=True)
                pages, max_pages = max_pages_memory(worker, client)
                jobs_run = plan.c1_requests + (plan.c1_requests + 3) // 4  # hold jobs, and a quarter as many no-ops
                memory_rows(report, idle, pages, max_pages, after_jobs, jobs_run)
        worker.stop()
        if "store" in phases:
            print("recovery, sweep and restart on their own stores", flush=True)
            store_phase(plan, report, scratch)
    except BaseException:
        print(worker.log()[-5000:], file=sys.stderr)
        raise
    finally:
        worker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()
    loads = ", ".join(f"{x:.2f}" for x in load_before), ", ".join(f"{x:.2f}" for x in load_after)
    report.notes += [
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {plan.name} run, {time.time() - began:.0f} s.",
        "Machine: " + ", ".join(f"{key} {value}" for key, value in machine().items()) + ".",
        f"Load average (1, 5, 15 min) before: {loads[0]}; after: {loads[1]}.",
        "Versions: " + ", ".join(f"{key} {value}" for key, value in report.versions.items()) + ".",
        ("c=1 figures: one keep-alive httpx client, the reference and the candidate alternating. "
         f"c={plan.concurrency} figures: {client_name}, {plan.throughput_rounds} alternating round(s) of "
         f"{plan.throughput_seconds:g} s each, the median round shown; the ratio is the median of paired rounds."),
    ]
    return report


def table(report: Report) -> str:
    lines = ["| measurement | result | reference (same run) | ratio | target | met |", "|---|---|---|---|---|---|"]
    for row in report.rows:
        lines.append(f"| {row.measurement} | {row.result} | {row.reference} | {row.ratio} | {row.target} | "
                     f"{verdict(row.met)} |")
    return "\n".join(lines)


def block(report: Report) -> str:
    return "\n".join([BEGIN, "", *[f"- {note}" for note in report.notes], "", table(report), "", END])


def write(report: Report, path: Path) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + block(report) + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block(report) + "\n"
    path.write_text(text)


def phase_list(raw: str) -> tuple[str, ...]:
    chosen = tuple(name.strip() for name in raw.split(",") if name.strip())
    unknown = set(chosen) - set(PHASES)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"phases are {', '.join(PHASES)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute: fewer samples")
    parser.add_argument("--out", type=Path, help=f"write the figures here (a full run: {DOC.relative_to(ROOT)})")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="record each phase with py-spy into DIR")
    parser.add_argument("--only", type=phase_list, default=PHASES, metavar="PHASE,...",
                        help=f"run only these phases, of {', '.join(PHASES)} (memory needs c1, and runs it)")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    report = run(plan, args.profile, args.only)
    if args.only != PHASES and args.out is None:
        args.quick = True  # a partial run never overwrites the full figures unless asked
    print()
    print("\n".join(report.notes))
    print()
    print(table(report))
    out = args.out or (None if args.quick else DOC)
    if out is not None:
        write(report, out)
        print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
