"""What the request log adds to a request: p50 and p95 of a cheap route
(`GET /api/v1/pages`) on two real workers, one with the log on and one with
it off, requests alternating between them so both see the same machine.

    .venv/bin/python bench/request_log.py [--requests 3000]

Prints its figures; asserts nothing (benchmarks are not tests).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.worker import WorkerProcess

ROUTE = "/pages"


def percentile(ordered: list[float], pct: float) -> float:
    return ordered[max(0, round(pct / 100 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="timed requests per worker")
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="penelope-bench-"))
    env = {"PENELOPE_PLUGINS": "plugins.web", "PENELOPE_DEMO": "0"}
    workers = {
        "log on": WorkerProcess(root / "on", env={**env, "REQUEST_LOG": "1"}),
        "log off": WorkerProcess(root / "off", env={**env, "REQUEST_LOG": "0"}),
    }
    try:
        for worker in workers.values():
            worker.start()
        clients = {name: worker.client() for name, worker in workers.items()}
        timings: dict[str, list[float]] = {name: [] for name in workers}
        for n in range(args.warmup + args.requests):
            for name, client in clients.items():
                began = time.perf_counter()
                response = client.get(ROUTE)
                elapsed_ms = (time.perf_counter() - began) * 1000
                assert response.status_code == 200, response.text
                if n >= args.warmup:
                    timings[name].append(elapsed_ms)
        for client in clients.values():
            client.close()
        with sqlite3.connect(workers["log on"].store / "penelope.db") as db:
            # The final rows are written at the stop.
            workers["log on"].stop()
            (rows_written,) = db.execute("select count(*) from activity_requestlogentry").fetchone()
    finally:
        for worker in workers.values():
            worker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"GET /api/v1{ROUTE}, {args.requests} requests per worker after {args.warmup} warm-up, keep-alive client")
    for name, values in timings.items():
        ordered = sorted(values)
        print(
            f"  {name:8}  p50 {percentile(ordered, 50):.3f} ms   p95 {percentile(ordered, 95):.3f} ms   "
            f"mean {statistics.fmean(ordered):.3f} ms"
        )
    on, off = (sorted(timings[name]) for name in ("log on", "log off"))
    added_p50 = percentile(on, 50) - percentile(off, 50)
    added_p95 = percentile(on, 95) - percentile(off, 95)
    print(f"  added    p50 {added_p50:+.3f} ms   p95 {added_p95:+.3f} ms")
    print(f"  rows written by the logging worker: {rows_written}")


if __name__ == "__main__":
    main()
