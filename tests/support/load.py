"""Load: MAX_JOBS jobs held, then concurrent pollers for a while.

Checks no 5xx but the documented 503, the worker's memory stays bounded, and
every held result is still correct afterwards. The suite runs a short
version (tests/test_load.py); `python -m tests.support.load` the full minute.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from harness.worker import WorkerProcess

PLUGINS = "plugins.web,tests.support.testing_plugins"


@dataclass
class LoadReport:
    jobs_held: int = 0
    extra_job_status: int = 0
    polls: int = 0
    poll_statuses: Counter = field(default_factory=Counter)
    wrong_results: int = 0
    rss_mb_start: float = 0.0
    rss_mb_max: float = 0.0
    rss_mb_end: float = 0.0
    fill_s: float = 0.0
    polls_per_s: float = 0.0
    checked_after: int = 0


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        import os

        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def fill(client: httpx.AsyncClient, pages: list[str], total: int) -> dict[str, str]:
    """Start `total` polling jobs, each page running one after another."""
    expected: dict[str, str] = {}
    counter = iter(range(total))

    async def page_worker(page: str) -> None:
        for number in counter:
            tag = f"job-{number}"
            accepted = await client.post(f"/{page}/plugin/testing/sleep", json={"seconds": 0, "tag": tag},
                                         headers={"X-Result-Ttl": "600"})
            accepted.raise_for_status()
            job_id = accepted.json()["job_id"]
            expected[job_id] = tag
            while (body := (await client.get(f"/jobs/{job_id}")).json()).get("state", body) == "running":
                await asyncio.sleep(0.005)

    await asyncio.gather(*(page_worker(page) for page in pages))
    return expected


async def run_load(worker: WorkerProcess, *, max_jobs: int, pages: int, pollers: int, duration_s: float) -> LoadReport:
    report = LoadReport()
    limits = httpx.Limits(max_connections=pollers + 8, max_keepalive_connections=pollers + 8)
    async with worker.async_client(timeout=60, limits=limits) as client:
        names = ["main"] + [f"load-{n}" for n in range(1, pages)]
        for name in names[1:]:
            await client.post("/pages", json={"page_id": name})
        began = time.monotonic()
        expected = await fill(client, names, max_jobs)
        report.fill_s = time.monotonic() - began
        report.jobs_held = len(expected)
        extra = await client.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "600"})
        report.extra_job_status = extra.status_code
        report.rss_mb_start = report.rss_mb_max = rss_mb(worker.process.pid)
        job_ids = list(expected)
        deadline = time.monotonic() + duration_s

        async def poller(seed: int) -> None:
            rng = random.Random(seed)
            while time.monotonic() < deadline:
                job_id = rng.choice(job_ids)
                response = await client.get(f"/jobs/{job_id}")
                report.polls += 1
                report.poll_statuses[response.status_code] += 1
                if response.status_code == 200 and response.json()["result"]["tag"] != expected[job_id]:
                    report.wrong_results += 1

        async def sample_memory() -> None:
            while time.monotonic() < deadline:
                report.rss_mb_max = max(report.rss_mb_max, rss_mb(worker.process.pid))
                await asyncio.sleep(0.5)

        polling_began = time.monotonic()
        await asyncio.gather(*(poller(n) for n in range(pollers)), sample_memory())
        report.polls_per_s = report.polls / (time.monotonic() - polling_began)
        report.rss_mb_end = rss_mb(worker.process.pid)
        for job_id, tag in expected.items():
            body = (await client.get(f"/jobs/{job_id}")).json()
            if body.get("state") == "done" and body["status"] == 200 and body["result"]["tag"] == tag:
                report.checked_after += 1
    return report


def start_worker(store: Path, *, max_jobs: int, pages: int) -> WorkerProcess:
    env = {"PENELOPE_PLUGINS": PLUGINS, "MAX_JOBS": str(max_jobs), "MAX_PAGES": str(pages), "REQUEST_LOG": "1"}
    return WorkerProcess(store, env=env).start()


def main() -> None:
    parser = argparse.ArgumentParser(description="MAX_JOBS held jobs and concurrent pollers against a real worker.")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--pollers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="penelope-load-") as root:
        worker = start_worker(Path(root) / "store", max_jobs=args.jobs, pages=args.pages)
        try:
            report = asyncio.run(
                run_load(worker, max_jobs=args.jobs, pages=args.pages, pollers=args.pollers, duration_s=args.seconds)
            )
        finally:
            worker.stop()
    print(f"{report.jobs_held} jobs held (filled in {report.fill_s:.1f} s); job {args.jobs + 1} answered "
          f"{report.extra_job_status}; {report.polls} polls by {args.pollers} pollers in {args.seconds:g} s "
          f"({report.polls_per_s:.0f}/s), statuses {dict(report.poll_statuses)}, {report.wrong_results} wrong; "
          f"worker RSS {report.rss_mb_start:.0f} MB at start, {report.rss_mb_max:.0f} MB at most, "
          f"{report.rss_mb_end:.0f} MB at the end; {report.checked_after}/{report.jobs_held} results correct afterwards")
    ok = (report.extra_job_status == 503 and set(report.poll_statuses) == {200} and not report.wrong_results
          and report.checked_after == report.jobs_held)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
