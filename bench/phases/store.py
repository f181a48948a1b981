"""Recovery, sweep and restart, each on a store of its own (filled by
bench/store_ops.py in a process of its own)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.report import Plan, Report, Row, ms
from bench.stats import Latency
from bench.worker_calls import PLUGINS
from harness.worker import WorkerProcess

ROOT = Path(__file__).resolve().parents[2]


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
    report.add(Row(f"Recovery of {recovered['interrupted']:,} running jobs (jobs.services.recover)",
                   f"{recovered['seconds'] * 1000:.0f} ms", "", "", "≤ 1 s", recovered["seconds"] <= 1))
    swept = store_op("sweep", scratch / "sweep", plan.store_jobs)
    files = swept["files_on_disk_before"] - swept["files_on_disk_after"]
    report.add(Row(f"Sweep of {swept['jobs']:,} expired jobs and {files:,} files (jobs.services.sweep)",
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
