"""Figures from timings: nearest-rank percentiles, as the request log's
workload computes them."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def percentile(ordered: list[float], pct: float) -> float:
    """The nearest-rank percentile of sorted values."""
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Latency:
    """Milliseconds: p50, p99 and mean of `count` timings."""

    p50: float
    p99: float
    mean: float
    count: int

    @classmethod
    def of(cls, timings_ms: list[float]) -> Latency:
        ordered = sorted(timings_ms)
        return cls(percentile(ordered, 50), percentile(ordered, 99), statistics.fmean(ordered), len(ordered))


@dataclass(frozen=True)
class Throughput:
    """Requests per second at a concurrency, with the latency under that load
    and the requests that failed (a transport error or a status other than 2xx)."""

    rps: float
    p50: float
    p99: float
    requests: int
    errors: int
    concurrency: int
    seconds: float
    client: str
