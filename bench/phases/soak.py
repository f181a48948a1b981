"""Costs that do not grow with work: one persona on MAX_PAGES (8) pages runs
10,000 plain calls and 2,000 jobs (half webhook, half polling), on a worker
of its own in a memory cgroup of its own; its memory after the first 1,000
against at the end, and its store's size at the start against after the
sweeps."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx

from bench import load
from bench.cgroup import MemoryCgroup, drop_page_cache
from bench.memory import Memory
from bench.report import Plan, Report, Row
from bench.worker_calls import PLUGINS
from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until

PAGES = 8
EXPRESSION = {"expression": "1+1"}
JOB_EVERY = 6  # one operation in six is a job: 2,000 of 12,000
# Scaled down so that the sweeps' work shows within the run: results kept 5 s,
# request-log rows 20 s (the defaults keep them up to 10 minutes and a week),
# a sweep every 2 s.
SETTINGS = {"SWEEP_S": "2", "REQUEST_LOG_RETENTION_S": "20"}
RESULT_TTL_S = "5"


def store_bytes(store: Path, suffix: str = "") -> int:
    """The store's database file and its write-ahead log as they lie on disk
    (with `suffix` "-wal", the log alone)."""
    names = [f"penelope.db{suffix}"] if suffix else ["penelope.db", "penelope.db-wal"]
    return sum((store / name).stat().st_size for name in names if (store / name).exists())


def soak_phase(plan: Plan, report: Report, scratch: Path) -> None:
    calls, jobs = (10_000, 2_000) if plan.name == "full" else (1_000, 200)
    cgroup = MemoryCgroup.make("penelope-soak")
    if cgroup:
        drop_page_cache()  # its files charged to it, as in a fresh container (bench/cgroup.py)
    store = scratch / "soak-store"
    worker = WorkerProcess(store, env={"PENELOPE_PLUGINS": PLUGINS, **SETTINGS},
                           before_exec=cgroup.join if cgroup else None)
    try:
        with worker.start().client() as client, Receiver() as receiver:
            pages = ["main", *(f"soak{n}" for n in range(1, PAGES))]
            for page in pages[1:]:
                client.post("/pages", json={"page_id": page}).raise_for_status()
            run_operations(worker, pages, receiver, 100, 0)  # warm-up: the log and the WAL at their working size
            time.sleep(3)  # a flush and a sweep
            start_size = store_bytes(store)
            first = (calls + jobs) // 12
            run_operations(worker, pages, receiver, first, 100)
            early = Memory.of(worker.process.pid, cgroup)
            run_operations(worker, pages, receiver, calls + jobs - first, 100 + first)
            end = Memory.of(worker.process.pid, cgroup)
            webhooks = (calls + jobs + 100) // JOB_EVERY // 2
            wait_until(lambda: len(receiver.requests) >= webhooks, timeout=120, what="every webhook")
            wait_until(lambda: client.get("/jobs").json()["jobs"] == [], timeout=120, interval=0.5,
                       what="every job swept")
            time.sleep(float(SETTINGS["REQUEST_LOG_RETENTION_S"]) + 2 * float(SETTINGS["SWEEP_S"]))
            end_size, end_wal = store_bytes(store), store_bytes(store, "-wal")
        worker.stop()
    finally:
        worker.stop()
        if cgroup:
            cgroup.remove()
        shutil.rmtree(store, ignore_errors=True)
    name = f"Soak: {calls:,} plain calls and {jobs:,} jobs (half webhook, half polling) on {PAGES} pages"
    pairs = [("charged (the cgroup)", early.charged_mb, end.charged_mb)] if cgroup else []
    pairs += [("worker PSS", early.worker_pss_mb, end.worker_pss_mb),
              ("browser PSS", early.browser_pss_mb, end.browser_pss_mb)]
    for what, before, after in pairs:
        growth = after / before - 1
        report.add(Row(f"{name}: memory, {what}", f"after the first {first:,}: {before:.0f} MB; at the end: {after:.0f} MB",
                       f"after {first:,}", f"{growth:+.1%}", "at most 10 % more", growth <= 0.10))
    growth = end_size / start_size - 1
    report.add(Row(f"{name}: the store's database (its file and write-ahead log) after the sweeps",
                   f"start {start_size / 1024:,.0f} KiB; after {end_size / 1024:,.0f} KiB (of which the log "
                   f"{end_wal / 1024:,.0f} KiB)", "start", f"{growth:+.1%}", "at most 10 % more", growth <= 0.10))


def run_operations(worker: WorkerProcess, pages: list[str], receiver: Receiver, count: int, offset: int) -> None:
    """`count` operations spread over the pages, one thread per page; the
    operation numbered n (from `offset`) is a job every JOB_EVERY-th time,
    alternately webhook and polling, else a plain call."""

    def drive(page: str, numbers: range) -> None:
        with worker.client() as client:
            for n in numbers:
                operate(client, page, n, receiver)

    load.in_threads(drive, [(page, range(offset + i, offset + count, len(pages))) for i, page in enumerate(pages)],
                    "the soak failed")


def operate(client: httpx.Client, page: str, n: int, receiver: Receiver) -> None:
    call = f"/{page}/plugin/web/evaluate"
    if n % JOB_EVERY:
        response = client.post(call, json=EXPRESSION)
        assert response.status_code == 200 and response.json()["value"] == 2, response.text
    elif n // JOB_EVERY % 2:
        response = client.post(call, json=EXPRESSION, headers={"X-Callback-Url": f"{receiver.url}/200/soak{n}"})
        assert response.status_code == 202, response.text
    else:
        response = client.post(call, json=EXPRESSION, headers={"X-Result-Ttl": RESULT_TTL_S})
        assert response.status_code == 202, response.text
        ended = client.get(f"/jobs/{response.json()['job_id']}", params={"wait": "10"})
        assert ended.json()["state"] == "done", ended.text
