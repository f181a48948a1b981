"""How long a process's start took, part by part, from the moment its
command started (so Python's own start and its imports are a part too):
one log line a supervisor and the benchmark can read."""

from __future__ import annotations

import os
import time

# Set by a script that `exec`s into the command (scripts/serve.sh), to the
# wall-clock time of its `exec`: the kernel's start time of the process is
# the script's, and its set-up is not the command's start.
EXEC_AT = "PENELOPE_EXEC_AT"


def seconds_since_exec() -> float:
    """Seconds since this process's command started: since the `exec` a
    script marked in PENELOPE_EXEC_AT (taken out of the environment, so no
    child reads it as its own), else since the kernel started the process
    (Linux: its start time in /proc/self/stat, in clock ticks since boot,
    against CLOCK_BOOTTIME)."""
    with open("/proc/self/stat") as stat:
        started_ticks = int(stat.read().rpartition(")")[2].split()[19])
    since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
    marked = os.environ.pop(EXEC_AT, "").replace(",", ".")  # $EPOCHREALTIME has the locale's decimal mark
    try:
        since_exec = time.time() - float(marked)
    except ValueError:
        return since_start
    return since_exec if 0 <= since_exec <= since_start else since_start


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
