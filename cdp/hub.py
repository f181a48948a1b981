"""The worker's CDP connections: their grants, the mux they share, and what
they tell the request log and the metrics. One per runtime (worker/runtime.py)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from activity.models import KIND_CDP
from cdp.grants import Grants
from cdp.mux import Mux
from core import metrics
from core.api import API_PREFIX
from core.events import Event
from core.routes import CDP

if TYPE_CHECKING:
    from playwright.async_api import Page

    from activity.log import RequestLog
    from browser.registry import PageRegistry

# How long a browser just launched may take to link its driver's tap (browser/tap.py).
LINK_WAIT_S = 5.0


class CdpHub:
    # What the hub hears on the bus: a lease's end ends the lease's grants.
    HEARS = (Event.PAGE_RELEASED,)

    def __init__(self, pages: PageRegistry, request_log: RequestLog) -> None:
        self.pages = pages
        self.request_log = request_log
        self.grants = Grants()
        self.open = 0  # connections open now
        self._mux: Mux | None = None
        self._opening: asyncio.Lock | None = None

    def on_event(self, message: dict[str, Any]) -> None:
        if message.get("page_id"):
            self.grants.lease_changed(message["page_id"])

    async def mux(self) -> Mux:
        """The mux on the browser that runs now, opened at its first use."""
        browser = self.pages.browser
        if browser is None or browser.context is None:
            raise RuntimeError("The browser is not running.")
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._mux is None or self._mux.closed or self._mux.context is not browser.context:
                self._mux = await Mux.open(browser.context, await browser.tap.link(LINK_WAIT_S))
            return self._mux

    @staticmethod
    async def target_of(tab: Page) -> str:
        """The CDP target id of a worker's tab."""
        session = await tab.context.new_cdp_session(tab)
        try:
            return (await session.send("Target.getTargetInfo"))["targetInfo"]["targetId"]
        finally:
            await session.detach()

    # --- the request log and the metrics ---------------------------------------------------

    def opened(self, page_id: str, who: str) -> float:
        self.open += 1
        metrics.cdp_connection("opened")
        started_at = time.time()
        self._log(page_id, "cdp/opened", f"{who}", 101, started_at, 0.0)
        return started_at

    def closed(self, page_id: str, who: str, why: str, started_at: float) -> None:
        self.open -= 1
        metrics.cdp_connection("closed")
        self._log(page_id, "cdp/closed", f"{who}: {why}", 200, started_at, (time.time() - started_at) * 1000)

    def refused(self, page_id: str, method: str, who: str) -> None:
        metrics.cdp_refused(method)
        self._log(page_id, "cdp/refused", f"{who}: {method}", 403, time.time(), 0.0)

    def _log(self, page_id: str, route: str, detail: str, status: int, started_at: float, duration_ms: float) -> None:
        self.request_log.record(
            kind=KIND_CDP, method="CDP", route=route, path=f"{API_PREFIX}{page_id}/{CDP} {detail}", page_id=page_id,
            status=status, started_at=started_at, duration_ms=duration_ms,
        )
