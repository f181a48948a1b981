"""What every-second schedules cost a worker: its CPU, the jobs they start,
the rows they leave and the log lines they write (issue 39; the figures are
in docs/guides/USING_JOBS.md).

    .venv/bin/python -m bench.schedule_cost [--schedules 1,100] [--seconds 60] [--max-jobs 1000]

Each count of schedules gets a fresh worker and store. Every schedule fires
`testing/sleep` (0 s) on `main`, a polling job held `--ttl` seconds, so the
figures are the scheduling and the job machinery's, not a plugin's. CPU is
the worker's process and its children (Chromium), from /proc, over the
measured span after a warm-up. The store's sweep runs at its default (SWEEP_S, 60 s).
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import tempfile
import time
from pathlib import Path

from harness.worker import WorkerProcess

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """User and system CPU seconds of `root` and its descendants alive now."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        spent[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    total = 0.0
    for pid, cpu in spent.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += cpu
    return total


def rows(store: Path, table: str) -> int:
    with sqlite3.connect(store / "penelope.db") as db:
        return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def measure(count: int, seconds: float, max_jobs: int, ttl: float) -> dict[str, float]:
    store = Path(tempfile.mkdtemp(prefix="schedule-cost-")) / "store"
    worker = WorkerProcess(store, env={
        "PENELOPE_PLUGINS": "plugins.web,tests.support.testing_plugins", "PENELOPE_DEMO": "0",
        "MAX_JOBS": str(max_jobs), "SCHEDULES_MAX": str(max(count, 100)),
    }).start()
    try:
        with worker.client() as api:
            idle_before, idle_at = tree_cpu_s(worker.process.pid), time.monotonic()
            time.sleep(5)
            idle = (tree_cpu_s(worker.process.pid) - idle_before) / (time.monotonic() - idle_at)
            for index in range(count):
                created = api.post("/schedules", json={
                    "name": f"every-second-{index}", "cron": "* * * * * *", "page_id": "main",
                    "plugin": "testing/sleep", "params": {"seconds": 0}, "result_ttl": ttl, "overlap": "queue",
                })
                assert created.status_code == 201, created.text
            time.sleep(5)  # warm-up: the first fires, the first sweep
            log_before = len(worker.log_path.read_text().splitlines())
            before = api.get("/schedules").json()["schedules"]
            fired_before, refused_before = (sum(row[name] for row in before) for name in ("fired", "refused"))
            cpu_before, started = tree_cpu_s(worker.process.pid), time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - started
            cpu = tree_cpu_s(worker.process.pid) - cpu_before
            listed = api.get("/schedules").json()["schedules"]
            warnings = [
                line for line in worker.log_path.read_text().splitlines()[log_before:] if re.search(r" WARNING ", line)
            ]
            for schedule in listed:
                api.patch(f"/schedules/{schedule['schedule_id']}", json={"paused": True})
        return {
            "schedules": count,
            "seconds": round(elapsed, 1),
            "idle_cpu_share": round(idle, 3),
            "cpu_share": round(cpu / elapsed, 3),
            "jobs_per_hour": round((sum(row["fired"] for row in listed) - fired_before) / elapsed * 3600),
            "refused_per_hour": round((sum(row["refused"] for row in listed) - refused_before) / elapsed * 3600),
            "job_rows_held": rows(store, "jobs_job"),
            "warning_lines_per_minute": round(len(warnings) / elapsed * 60, 1),
        }
    finally:
        worker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", default="1,100", help="counts of every-second schedules, comma-separated")
    parser.add_argument("--seconds", type=float, default=60, help="the measured span of each")
    parser.add_argument("--max-jobs", type=int, default=1000)
    parser.add_argument("--ttl", type=float, default=60, help="each job's result_ttl")
    options = parser.parse_args()
    for count in (int(part) for part in options.schedules.split(",")):
        print(measure(count, options.seconds, options.max_jobs, options.ttl), flush=True)


if __name__ == "__main__":
    main()
