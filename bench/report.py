"""A run's plan (how many of each measure) and its report: the rows each
phase adds, the notes on the machine and the versions, and the table written
to docs/BENCHMARKS.md between the generated-block markers."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.stats import Latency, Throughput
from harness.worker import WorkerProcess

BEGIN, END = "<!-- bench:begin (written by python -m bench.run) -->", "<!-- bench:end -->"


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
