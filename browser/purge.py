"""The memory purge: free the browser's memory without changing what any page shows.

Each idle page (not busy, no job, no waiters, no lease) gets a full garbage
collection of its JavaScript heap through the DevTools protocol. Pages in use
are skipped, and the purge never touches a page it skips: the browser-wide
steps (the HTTP cache, a memory-pressure signal that makes every renderer drop
its caches) run only when every page was purged.

The purge takes no page lock: its steps are safe beside a call that starts
meanwhile, and a job starting then must not meet a busy page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Error as PlaywrightError

from browser.pages import ManagedPage
from browser.registry import PageRegistry
from browser.runner import BrowserState
from core import metrics

log = logging.getLogger("penelope.purge")

# One DevTools step on one page; a page that does not answer in time is skipped.
PURGE_STEP_TIMEOUT_S = 15

PAGE_STEPS = [("HeapProfiler.collectGarbage", {})]
BROWSER_STEPS = [
    ("Network.clearBrowserCache", {}),
    ("Memory.simulatePressureNotification", {"level": "critical"}),
]


def skip_reason(page: ManagedPage, driven: bool = False) -> str | None:
    """Why the purge leaves this page alone, or None when it is idle; `driven`:
    a CDP client or live control holds it (the broker's `driven`)."""
    if page.job_id:
        return "job"
    if page.busy or page.waiting or driven:
        return "busy"
    if page.lease is not None:
        return "leased"
    if page.closed or page.tab is None or page.tab.is_closed() or page.crashed:
        return "closed"
    return None


@dataclass
class PurgeReport:
    purged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    browser_caches_cleared: bool = False
    memory_before: dict[str, int] = field(default_factory=dict)
    memory_after: dict[str, int] = field(default_factory=dict)
    duration_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        before = self.memory_before.get("rss_bytes", 0)
        after = self.memory_after.get("rss_bytes", 0)
        return {
            "purged": self.purged,
            "skipped": self.skipped,
            "browser_caches_cleared": self.browser_caches_cleared,
            "memory_before": self.memory_before,
            "memory_after": self.memory_after,
            "freed_bytes": before - after,
            "duration_ms": round(self.duration_ms, 3),
        }


async def purge_idle_pages(pages: PageRegistry) -> PurgeReport:
    """Purge every idle page; one purge at a time."""
    async with pages.purging:
        return await _purge(pages)


async def _purge(pages: PageRegistry) -> PurgeReport:
    report = PurgeReport()
    browser = pages.browser
    if browser is None or browser.context is None or browser.state != BrowserState.UP:
        return report  # a relaunch in progress: the new browser has nothing to purge
    began = time.monotonic()
    report.memory_before = await browser.memory()
    for page in list(pages.pages.values()):
        reason = skip_reason(page, pages.broker.driven(page))
        if reason is None:
            reason = await _run_steps(browser.context, page, PAGE_STEPS)
        if reason is None:
            report.purged.append(page.name)
        else:
            report.skipped.append({"page_id": page.name, "reason": reason})
    if report.purged and not report.skipped:
        # Only now is no page in use: these steps reach every page.
        first = pages.pages.get(report.purged[0])
        if first is not None and skip_reason(first, pages.broker.driven(first)) is None:
            report.browser_caches_cleared = await _run_steps(browser.context, first, BROWSER_STEPS) is None
    report.memory_after = await browser.memory()
    report.duration_ms = (time.monotonic() - began) * 1000
    metrics.purged()
    return report


async def _run_steps(context, page: ManagedPage, steps: list[tuple[str, dict]]) -> str | None:
    """Send the DevTools steps on the page; answers None, or why it failed."""
    try:
        session = await asyncio.wait_for(context.new_cdp_session(page.tab), PURGE_STEP_TIMEOUT_S)
    except (PlaywrightError, TimeoutError) as error:
        log.warning("purge could not reach page %s: %s", page.name, error)
        return "error"
    try:
        for method, params in steps:
            await asyncio.wait_for(session.send(method, params), PURGE_STEP_TIMEOUT_S)
    except (PlaywrightError, TimeoutError) as error:
        log.warning("purge step on page %s failed: %s", page.name, error)
        return "error"
    finally:
        with contextlib.suppress(PlaywrightError):  # the page went away, its session with it
            await session.detach()
    return None


async def purge_loop_step(pages: PageRegistry) -> None:
    """What the `purge` loop runs every PURGE_S."""
    report = (await purge_idle_pages(pages)).as_dict()
    log.info(
        "memory purge: purged %s, skipped %s, browser memory %d -> %d bytes",
        report["purged"], report["skipped"],
        report["memory_before"].get("rss_bytes", 0), report["memory_after"].get("rss_bytes", 0),
    )
