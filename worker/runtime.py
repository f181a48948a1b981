"""What runs beside the API on the worker's one event loop: start-up
(recovery before the port opens, the browser, page main), the background
loops, and a clean stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from django.db import close_old_connections

from browser.pages import registry
from browser.runner import Browser

log = logging.getLogger("penelope.worker")


class Loop:
    """Call `step` every `interval_s` seconds until cancelled; a failing step is
    logged and the loop goes on."""

    def __init__(self, name: str, step: Callable[[], Awaitable[object]], interval_s: float):
        self.name, self.step, self.interval_s = name, step, interval_s

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background loop %s failed; it goes on", self.name)
            finally:
                close_old_connections()


class Runtime:
    def __init__(self) -> None:
        self.browser = Browser()
        self.loops: list[Loop] = []
        self.startup_steps: list[Callable[[], Awaitable[object]]] = []
        # Long-running coroutines (e.g. the webhook deliverer), started after the browser.
        self.services: list[Callable[[], Awaitable[object]]] = []
        # Run first at a stop, while the browser is still open.
        self.shutdown_steps: list[Callable[[], Awaitable[object]]] = []
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        for step in self.startup_steps:
            await step()
        first_tab = await self.browser.start()
        registry.attach(self.browser, first_tab)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(each.run(), name=each.name) for each in self.loops]
        self._tasks += [loop.create_task(service()) for service in self.services]

    async def stop(self) -> None:
        for step in self.shutdown_steps:
            try:
                await step()
            except Exception:
                log.exception("a shutdown step failed")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        registry.detach()
        await self.browser.close()
