"""Resident memory of a worker process and of its browser, from Linux /proc,
with the worker's own helpers (browser/runner.py)."""

from __future__ import annotations

from dataclasses import dataclass

from browser.processes import _descendants, _is_browser, _rss

MB = 1024 * 1024


@dataclass(frozen=True)
class Memory:
    worker_mb: float
    browser_mb: float
    browser_processes: int

    @classmethod
    def of(cls, worker_pid: int) -> Memory:
        browser = [pid for pid in _descendants(worker_pid) if _is_browser(pid)]
        return cls(_rss(worker_pid) / MB, sum(_rss(pid) for pid in browser) / MB, len(browser))
