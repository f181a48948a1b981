"""A worker's memory three ways, from Linux: the proportional set size of its
process tree (a page shared by N processes counts 1/N in each), what its
cgroup is charged (bench/cgroup.py), and the sum of resident sizes (which
counts Chromium's shared pages once per process). The worker's own helpers
read /proc (browser/processes.py)."""

from __future__ import annotations

from dataclasses import dataclass

from bench.cgroup import MemoryCgroup
from browser.processes import is_browser
from core.procfs import descendants, pss, rss

MB = 1024 * 1024


@dataclass(frozen=True)
class Memory:
    worker_mb: float  # resident
    browser_mb: float  # resident, summed over the browser's processes
    browser_processes: int
    worker_pss_mb: float  # the worker and its helpers (Playwright's driver)
    browser_pss_mb: float
    charged_mb: float | None  # the cgroup's charge, when the worker runs in one of its own
    working_set_mb: float | None  # the charge less inactive page cache

    @classmethod
    def of(cls, worker_pid: int, cgroup: MemoryCgroup | None = None) -> Memory:
        tree = descendants(worker_pid)
        browser = [pid for pid in tree if is_browser(pid)]
        others = [worker_pid, *(pid for pid in tree if pid not in browser)]
        return cls(
            rss(worker_pid) / MB, sum(rss(pid) for pid in browser) / MB, len(browser),
            sum(pss(pid) for pid in others) / MB, sum(pss(pid) for pid in browser) / MB,
            cgroup.charged_bytes() / MB if cgroup else None, cgroup.working_set_bytes() / MB if cgroup else None,
        )

    @property
    def pss_mb(self) -> float:
        return self.worker_pss_mb + self.browser_pss_mb

    @property
    def rss_mb(self) -> float:
        return self.worker_mb + self.browser_mb

    def columns(self) -> str:
        """The three figures, labelled: charged first, the resident sum last."""
        charged = f"charged {self.charged_mb:.0f} MB (working set {self.working_set_mb:.0f}), " if self.charged_mb else ""
        return f"{charged}PSS {self.pss_mb:.0f} MB, resident sum {self.rss_mb:.0f} MB"
