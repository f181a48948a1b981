"""Load on a worker: timed requests one at a time (c=1), and throughput at a
concurrency with wrk (C, so the client is not what saturates first on two
cores) or, where wrk is missing, an asyncio httpx client.

A ratio is only fair when both sides were measured by the same client; the
callers alternate the reference and the candidate with one client.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.stats import Throughput

WRK_SCRIPT = Path(__file__).with_name("wrk_report.lua")


def timed_ms(call: Callable[[], object]) -> tuple[float, object]:
    began = time.perf_counter()
    answer = call()
    return (time.perf_counter() - began) * 1000, answer


def load_client() -> str:
    return "wrk" if shutil.which("wrk") else "httpx"


def throughput(url: str, key: str, *, concurrency: int, seconds: float, client: str) -> Throughput:
    if client == "wrk":
        return wrk(url, key, concurrency=concurrency, seconds=seconds)
    return asyncio.run(httpx_throughput(url, key, concurrency=concurrency, seconds=seconds))


def wrk(url: str, key: str, *, concurrency: int, seconds: float, threads: int = 2) -> Throughput:
    """GET `url` from `concurrency` keep-alive connections for `seconds`."""
    command = [
        "wrk", f"-t{threads}", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
        "-H", f"Authorization: Bearer {key}", "-s", str(WRK_SCRIPT), url,
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=True)
    line = next(line for line in finished.stdout.splitlines() if line.startswith("BENCH-JSON "))
    figures = json.loads(line.removeprefix("BENCH-JSON "))
    errors = sum(figures[name] for name in ("connect", "read", "write", "status", "timeout"))
    duration_s = figures["duration_us"] / 1e6
    return Throughput(
        rps=figures["requests"] / duration_s,
        p50=figures["p50_us"] / 1000,
        p99=figures["p99_us"] / 1000,
        requests=figures["requests"],
        errors=errors,
        concurrency=concurrency,
        seconds=duration_s,
        client="wrk",
    )


async def httpx_throughput(url: str, key: str, *, concurrency: int, seconds: float) -> Throughput:
    """The same measure from an asyncio httpx client, one task per connection."""
    from bench.stats import percentile

    timings: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, limits=limits, timeout=10) as client:
        deadline = time.monotonic() + seconds

        async def one_connection() -> None:
            nonlocal errors
            while time.monotonic() < deadline:
                began = time.perf_counter()
                try:
                    response = await client.get(url)
                    if not 200 <= response.status_code < 300:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                timings.append((time.perf_counter() - began) * 1000)

        began = time.monotonic()
        await asyncio.gather(*(one_connection() for _ in range(concurrency)))
        elapsed = time.monotonic() - began
    ordered = sorted(timings)
    return Throughput(
        rps=len(ordered) / elapsed,
        p50=percentile(ordered, 50),
        p99=percentile(ordered, 99),
        requests=len(ordered),
        errors=errors,
        concurrency=concurrency,
        seconds=elapsed,
        client="httpx",
    )


def in_threads(work: Callable[..., object], arguments: list[tuple], what: str) -> None:
    """`work(*args)` for each of `arguments`, each in a thread of its own, all
    at once; RuntimeError naming the first failures once all have ended."""
    failures: list[str] = []

    def run(*args: object) -> None:
        try:
            work(*args)
        except Exception as error:  # noqa: BLE001 - reported below, once all have ended
            failures.append(f"{args[0]}: {error}")

    threads = [threading.Thread(target=run, args=args) for args in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{what}: " + "; ".join(failures[:5]))
