"""A browser without Chromium, for the registry's in-process tests: the
real `Browser` (browser/runner.py) over a fake Playwright context whose
tabs are plain objects, and a clock the test moves.

Only what stands where Playwright stands is faked: `Browser._launch` (the
one place that starts Playwright and Chromium) gives a `FakeContext`, whose
`new_page` gives `FakeTab`s. Everything above it runs as in a worker: the
browser's state, `wait_up`, its stop (the context's `close` event) and
relaunch with back-off, the registry's `browser_down`/`browser_up`,
`new_tab`'s retries (browser/tabs.py), the pages' crash handling. A test
decides when a relaunch's launch ends (`World.launches`), when a tab fails
to open (`World.failing`), when a tab's renderer crashes
(`FakeTab.crash`) and when the browser stops (`FakeContext.die`).

Time is `Clock`: patched in as `time.monotonic`, it is the event loop's
time too (asyncio's loop reads `time.monotonic()`), so deadlines, lease
expiries and the broker's timers fire when the test moves it, never from a
real sleep. A test on this clock awaits nothing that needs a timer: it
spawns what may block and `settle`s, and the loop never sleeps. (Dataclass
fields whose default is `time.monotonic` itself, bound at import, still
read the real clock: a new page's `last_used`, a lease's `taken_at`; the
clock starts at the real one, so they read as a little in its past.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError

from browser.runner import Browser
from core.runtime import Tasks


class Clock:
    """`time.monotonic` while a test runs: starts at the real one, moves only by `advance`."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class World:
    """Everything the fake Playwright made, and the test's levers on it."""

    def __init__(self) -> None:
        self.contexts: list[FakeContext] = []
        self.launches = asyncio.Event()  # a launch ends once set; cleared, a relaunch waits for the test
        self.launches.set()
        self.failing = False  # new tabs fail to open (Playwright's error), as in a dying browser
        self.failures = 0  # tab openings failed so far

    @property
    def context(self) -> FakeContext | None:
        return self.contexts[-1] if self.contexts and not self.contexts[-1].closed else None

    def open_tabs(self) -> list[FakeTab]:
        return [tab for context in self.contexts for tab in context.tabs if not tab.closed]


class FakeTab:
    """A Playwright `Page` as the registry uses it: events, `is_closed`, `close`, `url`, `evaluate`."""

    def __init__(self, context: FakeContext) -> None:
        self.context = context
        self.url = "about:blank"
        self.closed = False
        self.crashed = False
        self.handlers: dict[str, list[Callable[[Any], Any]]] = {}

    def __repr__(self) -> str:
        return f"<tab {self.context.number}.{self.context.tabs.index(self)}{' closed' if self.closed else ''}>"

    def on(self, event: str, handler: Callable[[Any], Any]) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def is_closed(self) -> bool:
        return self.closed

    async def close(self) -> None:
        await asyncio.sleep(0)  # a round trip to the browser
        self.closed = True

    async def evaluate(self, expression: str) -> Any:
        await asyncio.sleep(0)
        if self.closed or self.crashed:
            raise PlaywrightError(
                "Target crashed" if self.crashed else "Target page, context or browser has been closed"
            )
        return 1

    def crash(self) -> None:
        """Its renderer died: Playwright's `crash` event; the tab stays open until closed."""
        self.crashed = True
        for handler in list(self.handlers.get("crash", [])):
            handler(self)


class FakeContext:
    """A persistent Playwright `BrowserContext`: its first tab, new tabs, cookies, its `close` event."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.number = len(world.contexts)
        self.closed = False
        self.handlers: dict[str, list[Callable[[Any], Any]]] = {}
        self.tabs: list[FakeTab] = [FakeTab(self)]  # Chromium starts with one

    @property
    def pages(self) -> list[FakeTab]:
        return [tab for tab in self.tabs if not tab.closed]

    def on(self, event: str, handler: Callable[[Any], Any]) -> None:
        self.handlers.setdefault(event, []).append(handler)

    async def new_page(self) -> FakeTab:
        await asyncio.sleep(0)
        if self.closed:
            raise PlaywrightError("Target page, context or browser has been closed")
        if self.world.failing:
            self.world.failures += 1
            raise PlaywrightError("Target crashed (a tab that failed to open, on purpose)")
        tab = FakeTab(self)
        self.tabs.append(tab)
        return tab

    async def cookies(self) -> list[dict[str, Any]]:
        return []

    async def clear_cookies(self) -> None:
        return None

    async def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        return None

    async def close(self) -> None:
        self.die()

    def die(self) -> None:
        """The browser went (killed, or closed): every tab with it, then the `close` event."""
        if self.closed:
            return
        self.closed = True
        for tab in self.tabs:
            tab.closed = True
        for handler in list(self.handlers.get("close", [])):
            handler(self)


class FakeBrowser(Browser):
    """The real Browser, launched on a FakeContext instead of Playwright and Chromium."""

    def __init__(self, world: World, tasks: Tasks) -> None:
        super().__init__(bus=None, tasks=tasks)
        self.world = world

    async def _launch(self) -> FakeTab:  # type: ignore[override]
        await self.world.launches.wait()
        context = FakeContext(self.world)
        self.world.contexts.append(context)
        context.on("close", self._context_closed)
        self.context = context  # type: ignore[assignment]
        self.calls_since_launch = 0
        self.recycle_due = None
        return context.pages[0]


def awaited(task: asyncio.Task) -> object:
    """What the task waits on now: the innermost object of its chain of awaits."""
    inner: object = task.get_coro()
    while (deeper := getattr(inner, "cr_await", None)) is not None:
        inner = deeper
    return inner


# Turns of the loop with no task moving before it counts as settled: a
# timer's callback hands a future to `asyncio.wait`'s, which wakes the task
# at the turn after, so a task may move two turns after the last one did.
STILL_TURNS = 5


async def settle() -> None:
    """Run the loop until everything that can run has run: every task waits
    on the same thing for STILL_TURNS turns (the loop's ready queue has no
    public reader), so what has not ended waits for a future, or for a timer
    only the clock's advance brings due."""
    me = asyncio.current_task()
    before: dict[asyncio.Task, object] = {}
    still = 0
    for _ in range(10_000):
        await asyncio.sleep(0)
        now = {task: awaited(task) for task in asyncio.all_tasks() if task is not me}
        moved = now.keys() != before.keys() or any(now[task] is not before[task] for task in now)
        still = 0 if moved else still + 1
        if still >= STILL_TURNS:
            return
        before = now
    raise AssertionError("the event loop never settled")
