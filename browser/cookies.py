"""The persona's cookies kept beside the browser, to put back into one that
was killed before Chromium wrote them to the profile."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from playwright.async_api import BrowserContext

from core.api import error_line
from core.runtime import Tasks

log = logging.getLogger("penelope.browser")

COOKIE_READ_TIMEOUT_S = 10
# Calls end faster than this for a client driving a page step by step: their
# cookies are read at most this often, the last call's always.
COOKIE_READ_EVERY_S = 1.0


class CookieJar:
    """The persona's cookies as the last call left them, to put back into a
    browser launched again after it was killed.

    Chromium writes cookies to the profile every 30 seconds or so, and at a
    clean close: a browser killed in between (the OOM killer) loses the
    cookies of its last seconds, a fresh login among them. So each call's end
    reads the cookies, off the call's path, in one task that coalesces the
    calls that end while it waits or reads: at most one read a second, and
    always one after the last call.
    """

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks
        self.cookies: list[dict[str, Any]] | None = None
        self._reading: asyncio.Task | None = None
        self._again = False
        self._last_read = -COOKIE_READ_EVERY_S  # monotonic

    def read_soon(self, context: Callable[[], BrowserContext | None]) -> None:
        """Read the cookies soon from the browser `context()` answers then
        (a relaunch may change it while a read waits)."""
        if self._reading is not None and not self._reading.done():
            self._again = True
            return
        self._reading = self.tasks.spawn(self._read(context), about="a read of the persona's cookies")

    async def _read(self, context: Callable[[], BrowserContext | None]) -> None:
        while True:
            pause = self._last_read + COOKIE_READ_EVERY_S - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            self._again = False
            self._last_read = time.monotonic()
            current = context()
            if current is not None:
                try:
                    # In this task (asyncio.wait_for would start another one per read).
                    async with asyncio.timeout(COOKIE_READ_TIMEOUT_S):
                        self.cookies = await current.cookies()
                except Exception:  # the browser stopped meanwhile: the last read stands
                    pass
            if not self._again:
                return

    async def put_back(self, context: BrowserContext) -> None:
        """Make the new browser's cookies the last read's: cleared, then added,
        so a cookie the last call deleted (a logout) does not come back from an
        older profile. Best effort: a browser that refuses them keeps the
        profile's, and the relaunch goes on."""
        if self._reading is not None:
            self._reading.cancel()
        if self.cookies is None:
            return
        try:
            async with asyncio.timeout(COOKIE_READ_TIMEOUT_S):
                await context.clear_cookies()
            if self.cookies:
                async with asyncio.timeout(COOKIE_READ_TIMEOUT_S):
                    await context.add_cookies(self.cookies)
            log.info("%d cookie(s) put back as the last call left them", len(self.cookies))
        except Exception as error:
            log.warning("the cookies of the last call could not be put back (%s); the profile's stand", error_line(error))
