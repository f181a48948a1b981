"""The worker's and the browser's resident memory: idle, after the run's
jobs, and with MAX_PAGES pages open."""

from __future__ import annotations

import time

import httpx

from bench.memory import Memory
from bench.report import Report, Row
from harness.worker import WorkerProcess


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
