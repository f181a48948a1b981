"""The cost of a request on the main worker: a job's start (the 202) and a
poll of a finished job against the reference `GET /api/v1/main`, and that
reference against the bare-stack floor (bench/floor.py), at c=1 and in paired
throughput rounds."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import load
from bench.report import Plan, Report, Row, lat, ms, rate
from bench.stats import Latency, Throughput
from bench.worker_calls import HOLD, NOOP, REFERENCE_ROUTE, start_job, wait_done
from harness.worker import WorkerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]


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
        rounds = rotated_rounds(key, plan, client_name, [reference, candidate])
        return cls.of(rounds[reference], rounds[candidate])

    @classmethod
    def of(cls, reference: list[Throughput], candidate: list[Throughput]) -> PairedRounds:
        """From rounds taken in turn: each candidate round against the reference round of its turn."""
        ratios = sorted(c.rps / r.rps for r, c in zip(reference, candidate, strict=True))
        median = [sorted(rounds, key=lambda r: r.rps)[len(rounds) // 2] for rounds in (reference, candidate)]
        return cls(ratios, median[0], median[1], sum(r.errors for r in candidate))


def rotated_rounds(key: str, plan: Plan, client_name: str, urls: list[str]) -> dict[str, list[Throughput]]:
    """`plan.throughput_rounds` turns, each a round of every URL in order."""
    rounds: dict[str, list[Throughput]] = {url: [] for url in urls}
    for _ in range(plan.throughput_rounds):
        for url in urls:
            rounds[url].append(load.throughput(url, key, concurrency=plan.concurrency,
                                               seconds=plan.throughput_seconds, client=client_name))
    return rounds


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
    """The cheapest authenticated route against the two floors (bench/floor.py):
    a bare ASGI application and a bare Django view, each under the same
    daphne. In turn at c=1; at c=32 in turns of one round each, every ratio
    taken between rounds of the same turn."""
    with Floor(worker.key, raw=True) as raw, Floor(worker.key) as floor:
        sides = {"raw": raw.url + "/api/v1", "django": floor.url + "/api/v1", "worker": worker.base_url + "/api/v1"}
        timings: dict[str, list[float]] = {side: [] for side in sides}
        with httpx.Client(headers={"Authorization": f"Bearer {worker.key}"}) as bare:
            for n in range(plan.warmup + plan.c1_requests):
                for side, base in sides.items():
                    ask = (lambda: client.get(REFERENCE_ROUTE)) if side == "worker" else (
                        lambda base=base: bare.get(base + REFERENCE_ROUTE))
                    elapsed, response = load.timed_ms(ask)
                    assert response.status_code == 200, response.text
                    if n >= plan.warmup:
                        timings[side].append(elapsed)
        raw_c1, django_c1, ref_c1 = (Latency.of(timings[side]) for side in sides)
        urls = {side: base + REFERENCE_ROUTE for side, base in sides.items()}
        rounds = rotated_rounds(worker.key, plan, client_name, list(urls.values()))
    raw_rounds, django_rounds, worker_rounds = (rounds[urls[side]] for side in sides)
    c = plan.concurrency
    report.add(Row("Floor: a bare ASGI application (no Django) with a bearer check under daphne, c=1", lat(raw_c1)))
    report.add(Row("Floor: a bare async Django view with a bearer check under daphne, c=1", lat(django_c1),
                   f"ASGI floor p50 {ms(raw_c1.p50)}", f"{django_c1.p50 / raw_c1.p50:.2f} ×", "(Django's own price)"))
    ratio = ref_c1.p50 / django_c1.p50
    report.add(Row("GET /api/v1/main against the Django floor, c=1", lat(ref_c1), f"Django floor p50 {ms(django_c1.p50)}",
                   f"{ratio:.2f} ×", "p50 ≤ 1.4 × Django floor", ratio <= 1.4))
    report.add(Row("GET /api/v1/main against the ASGI floor, c=1", lat(ref_c1), f"ASGI floor p50 {ms(raw_c1.p50)}",
                   f"{ref_c1.p50 / raw_c1.p50:.2f} ×", "(report)"))
    raw_pair = PairedRounds.of(raw_rounds, worker_rounds)
    django_pair = PairedRounds.of(django_rounds, worker_rounds)
    price = PairedRounds.of(raw_rounds, django_rounds)
    report.add(Row(f"Floor: the bare ASGI application, c={c} (median round)", rate(raw_pair.reference)))
    report.add(Row(f"Floor: the bare Django view, c={c} (median round)", rate(django_pair.reference),
                   f"ASGI floor {raw_pair.reference.rps:,.0f} req/s", f"{price.ratio:.2f} × ({rounds_text(price)})",
                   "(Django's own price)"))
    for pair, name, target, least in (
        (django_pair, "the Django floor", "≥ 0.6 × Django floor, 0 errors", 0.6),
        (raw_pair, "the ASGI floor", "≥ 0.35 × ASGI floor, 0 errors", 0.35),
    ):
        report.add(Row(f"GET /api/v1/main against {name}, c={c} (median round)", rate(pair.candidate),
                       f"{name} {pair.reference.rps:,.0f} req/s", f"{pair.ratio:.2f} × ({rounds_text(pair)})",
                       target, pair.ratio >= least and pair.errors == 0))


def rounds_text(pair: PairedRounds) -> str:
    return f"median of {len(pair.ratios)} paired rounds: " + ", ".join(f"{r:.2f}" for r in pair.ratios)


class Floor:
    """bench/floor.py in a process of its own, on a free loopback port: the
    Django view, or with `raw` the bare ASGI application."""

    def __init__(self, key: str, raw: bool = False) -> None:
        self.key = key
        self.raw = raw  # the bare ASGI application, not the Django view
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Floor:
        env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
        self.process = subprocess.Popen([sys.executable, "-m", "bench.floor", str(self.port), self.key,
                                         *(["--raw"] if self.raw else [])], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout.readline().strip() == "ready", "the floor did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
