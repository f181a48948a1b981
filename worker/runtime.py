"""The worker's runtime: the one owner of what the worker holds in memory
while it runs (its pages, its job runner, its schedules' loop…), and what
runs beside the API on its one event loop: start-up (recovery before the
port opens, the browser, page main), the background loops, a clean stop.

`serve` builds one (worker/setup.py adds the loops) and hands it to the ASGI
application, which puts it in every request's scope (core/runtime.py);
in-process tests build their own. Nothing of it lives at module level."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from activity.log import RequestLog
from browser.registry import PageRegistry
from browser.runner import Browser
from cdp.hub import CdpHub
from core.events import Bus, Event, OnEvent
from core.loops import Loop
from core.runtime import Tasks, Tracker
from core.start_clock import StartClock
from core.wrong_keys import WrongKeys
from demo_site.sign_in import SignInCodes
from jobs.run import WorkerParts
from jobs.runner import JobRunner
from live.human import Questions
from live.links import Links
from live.screencast import Casts
from schedules.firing import ScheduleFirer

log = logging.getLogger("penelope.worker")

__all__ = ["Loop", "Runtime"]


class Runtime:
    def __init__(self) -> None:
        # Its background tasks, each referenced until it ends and logged if it fails.
        self.tasks = Tasks()
        # The events of jobs, pages and the browser, to listeners and sockets.
        self.bus = Bus(self.tasks)
        self.browser = Browser(self.bus, self.tasks)
        # The open pages by name, and the broker that hands them out.
        self.pages = PageRegistry(self.bus, self.tasks)
        # Requests in flight, the last activity, the next wake: what the waker reads.
        self.tracker = Tracker()
        # Rows of the request log not flushed yet.
        self.request_log = RequestLog()
        # The live view: links to pages, the screencasts of the watched ones,
        # and the questions plugins ask a person there.
        self.links = Links(self.pages)
        self.casts = Casts(self.tasks)
        self.questions = Questions(self.links, self.casts)
        # CDP clients on leased pages: their tokens, and the one session they share.
        self.cdp = CdpHub(self.pages, self.request_log)
        # The turns of each address's wrong keys (core/wrong_keys.py).
        self.wrong_keys = WrongKeys()
        # One-shot media links being downloaded now (media_store/views.py).
        self.downloading: set[str] = set()
        # The demo site's sign-in codes not used yet (demo_site/sign_in.py).
        self.demo_codes = SignInCodes()
        # The jobs this worker runs, queues and keeps (jobs/runner.py).
        self.jobs = JobRunner(WorkerParts(self.pages, self.request_log, self.questions, self.bus, self.tasks), self.tracker)
        # The schedules' loop, which starts jobs on the same runner.
        self.schedules = ScheduleFirer(self.jobs)
        self.loops: list[Loop] = []
        self.startup_steps: list[Callable[[], Awaitable[object]]] = []
        # Long-running coroutines (e.g. the webhook deliverer), started after the browser.
        # Not "services": that word is the apps' writes of their own models (jobs/services.py).
        self.long_running: list[Callable[[], Awaitable[object]]] = []
        # In-process listeners of the bus (kinds, callback): subscribed while the runtime runs.
        self.listeners: list[tuple[tuple[Event, ...], OnEvent]] = [(CdpHub.HEARS, self.cdp.on_event)]
        self._unsubscribe: list[Callable[[], None]] = []
        # Run first at a stop, while the browser is still open.
        self.shutdown_steps: list[Callable[[], Awaitable[object]]] = []
        self._tasks: list[asyncio.Task] = []
        # Why the worker must exit non-zero (the browser could not be launched again).
        self.failure: str | None = None
        self.stop_serving: Callable[[], object] | None = None

    async def start(self, clock: StartClock | None = None, prepare: Callable[[], Awaitable[None]] | None = None) -> None:
        """Launch the browser and, meanwhile, `prepare` (the store's schema and
        keys) and the startup steps, which need the store but not the browser."""
        self._unsubscribe = [self.bus.subscribe(kinds, on_event) for kinds, on_event in self.listeners]
        launching = asyncio.ensure_future(self.browser.start())
        try:
            if prepare is not None:
                await prepare()
            for step in self.startup_steps:
                await step()
        except BaseException:
            launching.cancel()
            await asyncio.gather(launching, return_exceptions=True)
            raise
        if clock:
            clock.lap("migrations, keys and recovery, beside the browser's launch")
        first_tab = await launching
        if clock:
            clock.lap("the rest of the browser's launch and its first tab")
        self.pages.attach(self.browser, first_tab)
        self.browser.on_failed = self._browser_failed
        self._tasks = [self.tasks.spawn(each.run(), about=f"the {each.name} loop") for each in self.loops]
        self._tasks += [
            self.tasks.spawn(coroutine(), about=getattr(coroutine, "__qualname__", "a long-running coroutine"))
            for coroutine in self.long_running
        ]

    def _browser_failed(self, why: str) -> None:
        """Every relaunch failed: stop serving, so the worker exits non-zero
        and its supervisor (the waker, Kubernetes) starts it again."""
        self.failure = f"The browser could not be launched again: {why}"
        if self.stop_serving is not None:
            self.stop_serving()

    async def stop(self) -> None:
        await self.browser.stopping()  # first: nothing is relaunched or recycled under the stop
        for step in self.shutdown_steps:
            try:
                await step()
            except Exception:
                log.exception("a shutdown step failed")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self.pages.detach()
        try:
            await self.browser.close()
        finally:
            # Last: the events of the stop are written too, and the next start
            # goes on from the last id issued (core/event_log.py).
            await self.bus.log.close()
