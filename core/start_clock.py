"""How long a process's start took, part by part, from the moment the
kernel started it (so Python's own start and its imports are a part too):
one log line a supervisor and the benchmark can read."""

from __future__ import annotations

import os
import time


def seconds_since_exec() -> float:
    """Seconds since the kernel started this process (Linux: its start time in
    /proc/self/stat, in clock ticks since boot, against CLOCK_BOOTTIME)."""
    with open("/proc/self/stat") as stat:
        started_ticks = int(stat.read().rpartition(")")[2].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")


class StartClock:
    """`lap(name)` closes a part; `said()` is the line that names them all."""

    def __init__(self, first_part: str) -> None:
        self.began = time.monotonic() - seconds_since_exec()
        self.last = self.began
        self.parts: list[tuple[str, float]] = []
        self.lap(first_part)

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.parts.append((name, now - self.last))
        self.last = now

    def said(self) -> str:
        parts = "; ".join(f"{name} {seconds:.3f} s" for name, seconds in self.parts)
        return f"started in {self.last - self.began:.3f} s: {parts}"
