"""Loops that last: the worker's background loops and the operators' `--loop`
commands are the same class.

A failing step is logged and the loop goes on. `stop()` ends the loop after
the step in hand; `run_until_signalled` gives a command the usual contract:
the first SIGTERM or SIGINT stops after what is in hand (exit 0), a second
exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable

log = logging.getLogger("penelope.loops")


class Loop:
    """Call `step` every `interval_s` seconds until stopped or cancelled."""

    def __init__(self, name: str, step: Callable[[], Awaitable[object]], interval_s: float, *, at_start: bool = False):
        self.name, self.step, self.interval_s, self.at_start = name, step, interval_s, at_start
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        if not self.at_start:
            await self._pause()
        while not self._stopping.is_set():
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("loop %s: a step failed; the loop goes on", self.name)
            await self._pause()

    async def _pause(self) -> None:
        try:
            async with asyncio.timeout(self.interval_s):
                await self._stopping.wait()
        except TimeoutError:
            pass


def run_until_signalled(run: Callable[[], Awaitable[object]], stop: Callable[[], None]) -> None:
    """Run `run()` on a new event loop; the first SIGTERM/SIGINT calls `stop()`
    and lets `run()` finish, a second exits the process at once."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        signals = 0

        def on_signal(signum: int) -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                log.warning("second %s: exiting now", signal.Signals(signum).name)
                os._exit(128 + signum)
            log.info("%s: stopping after the work in hand", signal.Signals(signum).name)
            stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal, signum)
        await run()

    asyncio.run(main())
