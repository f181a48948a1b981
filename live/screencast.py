"""One page's screencast, shared by everyone who watches it.

Chromium draws the tab into JPEG frames (CDP `Page.startScreencast`) on a
CDP session of the page's own, opened when the first viewer joins and
closed when the last one leaves: a page nobody watches costs nothing.
Chromium draws a frame only while fewer than two wait for their
acknowledgement, so the acknowledgements pace its work (about LIVE_FPS
frames a second, whatever the page does), and the frames are handed on to
the viewers at most LIVE_FPS a second, the newest each time. What Chromium
would have drawn while frames waited is dropped, not sent later: after a
burst that had to be paced, a screenshot taken once the page is still
stands in for the frame that may be missing. Each viewer keeps only the
newest frame (the socket in live/sockets.py sends it when its connection
takes more), so a slow viewer sees fewer frames, never older ones, and
costs no backlog.

Input from a viewer with control goes to the same CDP session's `Input`
domain. The viewer sends positions as fractions of the frame it shows, and
they are placed on the page's own CSS pixels (the frame's metadata), so the
viewer's window size does not matter.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from playwright.async_api import Error as PlaywrightError

from core.runtime import Tasks

if TYPE_CHECKING:
    from playwright.async_api import CDPSession, Page

    from browser.pages import ManagedPage

log = logging.getLogger("penelope.live")

# How often the page's address and title are read again while it is watched.
META_EVERY_S = 1.0


TAB_GONE = 4012  # the close code that sends a viewer back for the page's next tab


class NoTab(Exception):
    """The page has no tab to show now (it crashed, or the browser is being
    launched again): a viewer tries again shortly."""


class Watcher:
    """What a page's cast needs of a viewer (live/sockets.py's socket)."""

    def frame(self, data: bytes) -> None: ...

    def meta(self, meta: dict[str, Any]) -> None: ...

    def ended(self, code: int) -> None: ...


class PageCast:
    def __init__(
        self, page: ManagedPage, on_idle: Callable[[PageCast], None], previous: PageCast | None = None,
        tasks: Tasks | None = None,
    ) -> None:
        self.page = page
        self.tasks = tasks or Tasks()
        self.on_idle = on_idle
        # The page's cast before this one, and this one's stop once it ends:
        # a new cast starts only once the last one's screencast is stopped,
        # so that stop cannot land on the new one.
        self.previous = previous
        self.stopping: asyncio.Task | None = None
        self.watchers: set[Watcher] = set()
        self.tab: Page | None = None
        self.cdp: CDPSession | None = None
        self.starting: asyncio.Future | None = None
        # The last frame's page size in CSS pixels, for placing input.
        self.width = 0.0
        self.height = 0.0
        self.scroll = (0.0, 0.0)
        # The newest frame (base64 as it came, decoded once it is handed on),
        # and the pacing of the hand-on: when it last ran, and its timer.
        self.last_frame: bytes | str | None = None
        self.handed_at = 0.0
        self.handing: asyncio.TimerHandle | None = None
        # The pacing of Chromium's frames (their acks), and the still frame
        # owed after a paced burst.
        self.acked_at = 0.0
        self.unsettled = False
        self.settling: asyncio.TimerHandle | None = None
        self.meta: dict[str, Any] = {"url": "", "title": ""}
        self.meta_reader: asyncio.Task | None = None

    # --- viewers -----------------------------------------------------------------------

    async def join(self, watcher: Watcher) -> None:
        """Add a viewer, starting the cast for the first; NoTab when there is
        nothing to show."""
        self.watchers.add(watcher)
        try:
            if self.cdp is None:
                if self.starting is None:
                    self.starting = self.tasks.spawn(self._start(), about=f"the screencast of page {self.page.name}")
                if not await asyncio.shield(self.starting):
                    raise NoTab()
        except BaseException:
            self.watchers.discard(watcher)
            if not self.watchers:
                self.on_idle(self)
            raise
        watcher.meta(self.meta)
        if isinstance(self.last_frame, bytes):
            watcher.frame(self.last_frame)  # a still page sends no new frame for a while

    def leave(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)
        if not self.watchers:
            self.on_idle(self)
            self.stopping = self.tasks.spawn(self.stop(), about=f"stopping the screencast of page {self.page.name}")

    def tell(self, meta: dict[str, Any]) -> None:
        for watcher in list(self.watchers):
            watcher.meta(meta)

    # --- the cast ----------------------------------------------------------------------

    async def _start(self) -> bool:
        """Start the cast on the page's tab; False when it has none to show."""
        if self.previous is not None and self.previous.stopping is not None:
            await asyncio.shield(self.previous.stopping)
        self.previous = None
        tab = self.page.tab
        if tab is None or tab.is_closed() or self.page.crashed:
            self.starting = None
            return False
        cdp = None
        try:
            cdp = await tab.context.new_cdp_session(tab)
            cdp.on("Page.screencastFrame", self._frame)
            tab.on("close", self._tab_gone)
            tab.on("crash", self._tab_gone)
            side = settings.LIVE_MAX_SIDE
            await cdp.send(
                "Page.startScreencast",
                {"format": "jpeg", "quality": settings.LIVE_JPEG_QUALITY, "maxWidth": side, "maxHeight": side},
            )
        except PlaywrightError as error:
            self.starting = None
            log.info("page %s: no screencast (%s)", self.page.name, error.message)
            self.tab, self.cdp = tab, cdp
            await self.stop()
            return False
        self.tab, self.cdp = tab, cdp
        self.starting = None
        if not self.watchers:  # its only viewer went while it started
            await self.stop()
            return False
        await self._read_meta()
        self.meta_reader = self.tasks.spawn(self._keep_meta(cdp), about=f"reading page {self.page.name}'s address and title")
        return True

    async def stop(self) -> None:
        cdp, tab, self.cdp, self.tab = self.cdp, self.tab, None, None
        self.last_frame = None
        for timer in (self.handing, self.settling):
            if timer is not None:
                timer.cancel()
        self.handing = self.settling = None
        if self.meta_reader is not None:
            self.meta_reader.cancel()
        if tab is not None:
            tab.remove_listener("close", self._tab_gone)
            tab.remove_listener("crash", self._tab_gone)
        if cdp is None:
            return
        try:
            await cdp.send("Page.stopScreencast")
        except PlaywrightError:
            pass  # the tab went first, or the cast never started
        try:
            await cdp.detach()
        except PlaywrightError:
            pass  # the tab went first

    def _tab_gone(self, *_: Any) -> None:
        """The tab closed or crashed: the cast ends, and its viewers are told
        to come back (close code 4012) for the page's next tab, on a new cast."""
        log.info("page %s: its tab went under %d viewer(s)", self.page.name, len(self.watchers))
        self.on_idle(self)
        self.stopping = self.tasks.spawn(self.stop(), about=f"stopping the screencast of page {self.page.name}")
        for watcher in list(self.watchers):
            watcher.ended(TAB_GONE)

    def _frame(self, params: dict[str, Any]) -> None:
        cdp = self.cdp
        if cdp is None:
            return
        metadata = params.get("metadata") or {}
        self.width = float(metadata.get("deviceWidth") or self.width)
        self.height = float(metadata.get("deviceHeight") or self.height)
        self.scroll = (float(metadata.get("scrollOffsetX") or 0), float(metadata.get("scrollOffsetY") or 0))
        self.last_frame = params["data"]
        if self.handing is None:
            wait = self.handed_at + 1 / settings.LIVE_FPS - time.monotonic()
            if wait <= 0:
                self._hand_on()
            else:
                self.handing = asyncio.get_running_loop().call_later(wait, self._hand_on)
        # Chromium draws the next frame only once this one is acknowledged
        # (two at most may wait): a late ack is what bounds its work to
        # about LIVE_FPS frames a second on a page that never stops changing.
        now = time.monotonic()
        due = max(now, self.acked_at + 1 / settings.LIVE_FPS)
        self.acked_at = due
        loop = asyncio.get_running_loop()
        loop.call_later(due - now, self._ack, cdp, params["sessionId"])
        if self.settling is not None:
            self.settling.cancel()
            self.settling = None
        if due > now or self.unsettled:
            # But what it draws while frames wait is dropped, never sent
            # later: once the page has been still for two frames' time after
            # a paced burst, its last state is taken by a screenshot instead.
            self.unsettled = True
            self.settling = loop.call_later(due - now + 2 / settings.LIVE_FPS, self._settle, cdp)

    def _ack(self, cdp: CDPSession, session: int) -> None:
        if cdp is self.cdp:
            self.tasks.spawn(self._send(cdp, "Page.screencastFrameAck", {"sessionId": session}), about="a screencast frame's ack")

    def _settle(self, cdp: CDPSession) -> None:
        self.settling = None
        if cdp is self.cdp:
            self.tasks.spawn(self._screenshot(cdp), about=f"the still frame of page {self.page.name}")

    async def _screenshot(self, cdp: CDPSession) -> None:
        shot_params: dict[str, Any] = {"format": "jpeg", "quality": settings.LIVE_JPEG_QUALITY, "optimizeForSpeed": True}
        if self.width and self.height:  # no larger than the frames: LIVE_MAX_SIDE
            scale = min(1.0, settings.LIVE_MAX_SIDE / max(self.width, self.height))
            # The clip is on the document: the viewport is where the page is scrolled to.
            x, y = self.scroll
            shot_params["clip"] = {"x": x, "y": y, "width": self.width, "height": self.height, "scale": scale}
        try:
            shot = await cdp.send("Page.captureScreenshot", shot_params)
        except PlaywrightError:
            self.unsettled = False  # the tab went, or cannot be shot: the next burst tries again
            return
        if cdp is self.cdp and self.settling is None:  # no frame came meanwhile
            self.unsettled = False
            self.last_frame = shot["data"]
            if self.handing is None:
                self._hand_on()

    def _hand_on(self) -> None:
        """The newest frame to every viewer: at most LIVE_FPS a second, and
        always the last one a burst left."""
        self.handing = None
        self.handed_at = time.monotonic()
        if self.cdp is None or self.last_frame is None:
            return
        if isinstance(self.last_frame, str):
            self.last_frame = base64.b64decode(self.last_frame)  # once per frame handed on, not per frame drawn
        for watcher in list(self.watchers):
            watcher.frame(self.last_frame)

    async def _send(self, cdp: CDPSession, method: str, params: dict[str, Any]) -> None:
        try:
            await cdp.send(method, params)
        except PlaywrightError:
            pass  # the tab went; `_tab_gone` tells the viewers

    async def _keep_meta(self, cdp: CDPSession) -> None:
        """The page's address and title, read again every META_EVERY_S while
        it is watched: a title can change with nothing drawn."""
        while cdp is self.cdp:
            await asyncio.sleep(META_EVERY_S)
            await self._read_meta()

    async def _read_meta(self) -> None:
        tab = self.tab
        if tab is None:
            return
        try:
            title = await tab.title()
        except PlaywrightError:
            return
        meta = {"url": tab.url, "title": title}
        if meta != self.meta:
            self.meta = meta
            self.tell(meta)

    # --- input -------------------------------------------------------------------------

    def place(self, fx: Any, fy: Any) -> tuple[float, float] | None:
        """A viewer's fractions of the frame as the page's CSS pixels, or None
        when they are not numbers from 0 to 1."""
        if not all(isinstance(f, int | float) and not isinstance(f, bool) and 0 <= f <= 1 for f in (fx, fy)):
            return None
        return fx * self.width, fy * self.height

    async def dispatch(self, method: str, params: dict[str, Any]) -> None:
        if self.cdp is not None:
            await self._send(self.cdp, method, params)


class Casts:
    """The pages being watched now, by page."""

    def __init__(self, tasks: Tasks | None = None) -> None:
        self.tasks = tasks or Tasks()
        self.by_page: dict[int, PageCast] = {}
        # The last cast of each page that ended, until the next one starts.
        self.ended: dict[int, PageCast] = {}

    def of(self, page: ManagedPage) -> PageCast:
        for key in [key for key, ended in self.ended.items() if ended.stopping is not None and ended.stopping.done()]:
            del self.ended[key]  # stopped: nothing to wait for
        cast = self.by_page.get(id(page))
        if cast is None or cast.page is not page:
            previous = self.ended.pop(id(page), None)
            previous = previous if previous is not None and previous.page is page else None
            cast = self.by_page[id(page)] = PageCast(page, self._idle, previous, self.tasks)
        return cast

    def watching(self, page: ManagedPage) -> PageCast | None:
        cast = self.by_page.get(id(page))
        return cast if cast is not None and cast.page is page else None

    def _idle(self, cast: PageCast) -> None:
        if self.by_page.get(id(cast.page)) is cast:
            del self.by_page[id(cast.page)]
            self.ended[id(cast.page)] = cast

    def viewers(self) -> int:
        return sum(len(cast.watchers) for cast in self.by_page.values())

    def running(self) -> int:
        """Screencasts running now (a benchmark and the tests read it)."""
        return sum(1 for cast in self.by_page.values() if cast.cdp is not None)
