"""The worker's memory (charged, PSS and the resident sum, bench/memory.py):
idle, after the run's jobs, and with MAX_PAGES pages open on the demo site."""

from __future__ import annotations

import time

import httpx

from bench.cgroup import MemoryCgroup
from bench.memory import Memory
from bench.report import Report, Row
from harness.worker import WorkerProcess


def max_pages_memory(worker: WorkerProcess, client: httpx.Client, cgroup: MemoryCgroup | None) -> tuple[Memory, int]:
    """Open pages up to MAX_PAGES, each showing a demo profile; measure; close them."""
    max_pages = client.get("/pages").json()["max_pages"]
    opened = [f"bench{n}" for n in range(1, max_pages)]
    for page_id in opened:
        client.post("/pages", json={"page_id": page_id}).raise_for_status()
    for page_id in ["main", *opened]:
        response = client.get(f"/{page_id}/plugin/demo/open-account?handle=alice")
        assert response.status_code == 200, response.text
    time.sleep(1)
    memory = Memory.of(worker.process.pid, cgroup)
    for page_id in opened:
        client.delete(f"/{page_id}").raise_for_status()
    return memory, max_pages


def memory_rows(report: Report, idle: Memory, pages: Memory, max_pages: int, after: Memory, jobs: int) -> None:
    def parts(memory: Memory) -> str:
        return (f"{memory.columns()}; of the PSS, the worker and its driver {memory.worker_pss_mb:.0f} MB, "
                f"Chromium {memory.browser_pss_mb:.0f} MB ({memory.browser_processes} processes)")

    report.add(Row("Memory of the worker's process tree, idle (after a warm-up)", parts(idle)))
    for who, before, later in (("charged", idle.charged_mb, after.charged_mb), ("PSS", idle.pss_mb, after.pss_mb)):
        if before is None:
            continue
        growth = later / before - 1
        report.add(Row(f"Memory after {jobs:,} more jobs, {who}", parts(after) if who == "charged" or idle.charged_mb is None
                       else f"{later:.0f} MB", f"idle {before:.0f} MB", f"{growth:+.1%}", "growth ≤ 10 %", growth <= 0.10))
    report.add(Row(f"Memory with {max_pages} pages open on the demo site (sizes docs/guides/SCALING.md)", parts(pages),
                   f"idle: {idle.columns()}"))
