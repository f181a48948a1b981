"""The persona's browser: one persistent Chromium context on `store/profile`.

Playwright objects are created and touched only on the worker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

from django.conf import settings
from playwright.async_api import BrowserContext, Page, Playwright, Request, Response, async_playwright

from browser.allowance import Allowance, WorkerPort
from browser.cookies import CookieJar
from browser.egress import Egress
from browser.flags import CHROMIUM_ARGS, GUARDED_ARGS, clear_driver_tap, set_driver_options
from browser.launch import find_executable, proxy_settings
from browser.processes import clear_stale_profile_lock, resident_bytes
from browser.tap import DriverTap
from browser.upstream import Upstream
from core import metrics
from core.api import error_line
from core.events import Bus, Event
from core.runtime import Tasks

log = logging.getLogger("penelope.browser")

class BrowserState(StrEnum):
    """What `GET /api/v1/health` says of the browser (`browser_state`)."""

    STARTING = "starting"  # the first launch, before the port opens
    UP = "up"  # it takes calls
    RELAUNCHING = "relaunching"  # it stopped, or is being recycled: calls wait for it
    FAILED = "failed"  # every relaunch failed: the worker is exiting


class Cause(StrEnum):
    """Why the browser was launched again: the `cause` of events, metrics and page states."""

    BROWSER_STOPPED = "browser_stopped"  # it exited (killed, out of memory, crashed)
    MEMORY = "memory"  # recycled past BROWSER_MAX_MB
    CALLS = "calls"  # recycled after BROWSER_RECYCLE_AFTER_CALLS


class BrowserListener(Protocol):
    """What the browser tells its pages (browser/pages.py's registry)."""

    def browser_down(self, cause: Cause) -> None:
        """The tabs are gone (the browser stopped, or is being recycled)."""

    async def browser_up(self, first_tab: Page, cause: Cause) -> None:
        """A new browser runs; `first_tab` is its first tab. Reopen the pages."""

    def idle(self) -> bool:
        """No call, job or waiter on any page: a recycle may begin."""

    def navigation_refused(self, tab: Page, refusal: str) -> None:
        """BROWSER_REFUSE_PRIVATE refused a navigation of `tab`'s main frame."""


class BrowserUnavailable(Exception):
    """The browser cannot take a call now; the message says why."""


RELAUNCH_BACKOFF_CAP_S = 60
class Browser:
    """The persona's one browser: a persistent context launched at start,
    watched (Playwright's close event, not a timer), and launched again on
    the same profile when it stops or is recycled.

    A relaunch is a fresh Playwright driver and a fresh Chromium: cookies and
    storage are in the profile, so they are kept; the tabs are not. While it
    runs, `state` is RELAUNCHING and `wait_up` holds callers; when every
    attempt failed, `state` is FAILED and `on_failed` ends the worker.
    """

    def __init__(self, bus: Bus | None = None, tasks: Tasks | None = None) -> None:
        self.bus = bus  # where its stops, relaunches and failure are published
        self.tasks = tasks or Tasks()
        self._playwright: Playwright | None = None
        self.context: BrowserContext | None = None
        self.executable = ""
        self.state = BrowserState.STARTING
        self._up = asyncio.Event()
        self._closing = False  # a close of our own: its close event is no stop
        self._stopped = False  # the worker stops: nothing is launched again
        self.listener: BrowserListener | None = None
        self.on_failed: Callable[[str], object] | None = None
        self.failure: str | None = None
        self._relaunch: asyncio.Task | None = None
        self.calls_since_launch = 0
        self.recycle_due: Cause | None = None  # once a recycling bound is passed
        self.cookie_jar = CookieJar(self.tasks)
        # The CDP clients' way onto Chromium's pipe, beside Playwright's (browser/tap.py).
        self.tap = DriverTap()
        # BROWSER_REFUSE_PRIVATE: the browser's only way out, started with the
        # first launch and kept across relaunches (browser/egress.py).
        self.egress: Egress | None = None
        # (method, target, why) of each connection the egress refused: the request log.
        self.on_refused: Callable[[str, str, str], object] | None = None

    # --- launching ---------------------------------------------------------------

    async def start(self) -> Page:
        """The first launch: Chromium and its first tab. A failure here is the
        start's own (the worker does not open its port)."""
        first_tab = await self._launch()
        self._set_up()
        return first_tab

    async def _launch(self) -> Page:
        set_driver_options(await self.tap.open())
        try:
            self._playwright = await async_playwright().start()
        finally:
            clear_driver_tap()
        try:
            self.executable = find_executable(self._playwright)
            profile = settings.PROFILE_DIR
            profile.mkdir(parents=True, exist_ok=True)
            clear_stale_profile_lock(profile)
            # Downloads run into the worker's own folder, never one a plugin or
            # a client names; one left by a browser that stopped is no one's.
            shutil.rmtree(settings.DOWNLOADS_DIR, ignore_errors=True)
            args = list(CHROMIUM_ARGS)
            if not settings.CHROMIUM_SANDBOX:
                args.append("--no-sandbox")  # off by default as root, where Chromium refuses to sandbox
            if settings.BROWSER_REFUSE_PRIVATE:
                proxy = {"server": self._start_egress().server}
                args += GUARDED_ARGS
            else:
                proxy = proxy_settings(settings.PENELOPE_PROXY)
            context = await asyncio.wait_for(
                self._playwright.chromium.launch_persistent_context(
                    str(profile),
                    executable_path=self.executable,
                    headless=settings.PENELOPE_HEADLESS,
                    proxy=proxy,
                    args=args,
                    downloads_path=str(settings.DOWNLOADS_DIR),
                ),
                settings.BROWSER_LAUNCH_TIMEOUT_S,
            )
            context.on("close", self._context_closed)
            self.context = context
            if self.egress is not None:
                context.on("response", self._response)
                context.on("requestfailed", self._request_failed)
            first_tab = context.pages[0] if context.pages else await self.new_tab()
        except BaseException:
            await self._shut_down()
            raise
        self.calls_since_launch = 0
        self.recycle_due = None
        log.info("browser started: %s", self.executable)
        return first_tab


    def _publish(self, event: Event, detail: dict) -> None:
        if self.bus is not None:
            self.bus.publish(event, page_id=None, detail=detail)
    def _start_egress(self) -> Egress:
        if self.egress is None:
            egress = Egress(
                Allowance.parse(settings.BROWSER_ALLOW),
                Upstream.from_url(settings.PENELOPE_PROXY),
                on_refused=self._egress_refused,
                worker=WorkerPort.of(settings.PENELOPE_HOST, settings.PENELOPE_PORT),
            )
            egress.start()
            self.egress = egress
        return self.egress

    def _egress_refused(self, method: str, target: str, why: str) -> None:
        """On the egress's thread: a connection was refused."""
        if self.on_refused is not None:
            self.on_refused(method, target, why)

    def _response(self, response: Response) -> None:
        """A page's navigation answered by the egress's refusal: the call in hand answers it."""
        if response.status == 403 and response.headers.get("x-penelope-refused") == "1":
            self._navigation_refused(response.request)

    def _request_failed(self, request: Request) -> None:
        """A navigation whose tunnel the egress refused (https, a redirect hop to one)."""
        if "ERR_TUNNEL_CONNECTION_FAILED" in (request.failure or ""):
            self._navigation_refused(request)

    def _navigation_refused(self, request: Request) -> None:
        tab = _main_frame_navigation_tab(request)
        if tab is None or self.listener is None or self.egress is None:
            return
        refusal = self.egress.sentence_for(request.url)
        if refusal is not None:
            self.listener.navigation_refused(tab, refusal)

    def _set_up(self) -> None:
        self.state = BrowserState.UP
        self._up.set()

    async def new_tab(self, timeout_s: float | None = None) -> Page:
        if self.context is None:
            raise BrowserUnavailable("The browser is not running.")
        return await asyncio.wait_for(self.context.new_page(), timeout_s or settings.BROWSER_LAUNCH_TIMEOUT_S)

    async def wait_up(self, timeout_s: float) -> None:
        """Return once the browser takes calls, waiting up to `timeout_s` for
        a relaunch in progress; BrowserUnavailable otherwise."""
        deadline = time.monotonic() + timeout_s
        while self.state == BrowserState.RELAUNCHING and time.monotonic() < deadline:
            try:
                async with asyncio.timeout(deadline - time.monotonic()):
                    await self._up.wait()
            except TimeoutError:
                break
            # Woken: UP or FAILED end the loop; a relaunch begun since (it
            # clears the event) is waited for in the time left.
        if self.state == BrowserState.UP:
            return
        if self.state == BrowserState.FAILED:
            raise BrowserUnavailable(f"The browser could not be launched again: {self.failure}")
        raise BrowserUnavailable(f"The browser is {self.state.value}; try again in a few seconds.")

    # --- stops and relaunches ------------------------------------------------------

    def _context_closed(self, context: BrowserContext) -> None:
        """Playwright's close event: ours at a stop or a recycle, else the browser stopped."""
        if self._closing or self._stopped or context is not self.context:
            return
        self.context = None
        if self.state != BrowserState.UP:
            # RELAUNCHING: the attempt in hand fails at its next step (or at its
            # check of the context) and is tried again. STARTING: the start fails.
            return
        log.warning("the browser stopped (%s); launching it again", self.executable)
        self._begin_relaunch(Cause.BROWSER_STOPPED)

    def _begin_relaunch(self, cause: Cause) -> None:
        """Flip to RELAUNCHING now (no await: a caller from here on waits) and relaunch in a task."""
        if self._stopped:
            return
        self.state = BrowserState.RELAUNCHING
        self._up.clear()
        self._publish(Event.BROWSER_DOWN, {"cause": cause.value})
        if self.listener is not None:
            self.listener.browser_down(cause)
        self._relaunch = self.tasks.spawn(self._relaunch_with_backoff(cause), about=f"the browser's relaunch ({cause})")

    async def _relaunch_with_backoff(self, cause: Cause) -> None:
        began = time.monotonic()
        await self._shut_down()
        attempts = max(1, settings.BROWSER_RELAUNCH_ATTEMPTS)
        pause = settings.BROWSER_RELAUNCH_S
        for attempt in range(1, attempts + 1):
            try:
                first_tab = await self._launch()
                if cause == Cause.BROWSER_STOPPED:  # only after a stop: a recycle's clean close wrote them to the profile
                    await self.cookie_jar.put_back(self.context)
                if self.listener is not None:
                    await self.listener.browser_up(first_tab, cause)
                if self.context is None:  # it stopped again while the pages were reopened
                    raise BrowserUnavailable("the browser stopped again as it was launched")
                break
            except Exception as error:
                await self._shut_down()
                if attempt == attempts:
                    self._fail(f"{attempts} launch attempt(s) failed, the last with: {error_line(error)}")
                    return
                log.warning(
                    "browser launch attempt %d of %d failed (%s); next in %g s", attempt, attempts, error_line(error), pause
                )
                await asyncio.sleep(pause)
                pause = min(pause * 2, RELAUNCH_BACKOFF_CAP_S)
        took = time.monotonic() - began
        metrics.browser_relaunched(cause, took)
        self._set_up()
        log.info("browser up again after %.2f s (%s, attempt %d)", took, cause, attempt)
        self._publish(Event.BROWSER_UP, {"cause": cause.value, "took_s": round(took, 3)})

    def _fail(self, why: str) -> None:
        self.state = BrowserState.FAILED
        self.failure = why
        self._up.set()  # waiters wake and see FAILED
        log.critical("the browser cannot be launched again (%s); the worker exits", why)
        self._publish(Event.BROWSER_FAILED, {"error": why})
        if self.on_failed is not None and not self._stopped:
            self.on_failed(why)

    # --- recycling ---------------------------------------------------------------

    def call_ended(self) -> None:
        """A call or a job's run ended on one of the pages: counted, and a
        recycle that is due begins if nothing else runs."""
        self.calls_since_launch += 1
        if self.state == BrowserState.UP and self.context is not None:
            self.cookie_jar.read_soon(lambda: self.context if self.state == BrowserState.UP else None)
        limit = settings.BROWSER_RECYCLE_AFTER_CALLS
        if limit and self.calls_since_launch >= limit and self.recycle_due is None:
            self.recycle_due = Cause.CALLS
        self.recycle_if_due()

    def memory_checked(self, charged_bytes: int) -> None:
        """A read of the browser's charged memory (BROWSER_CHECK_S loop)."""
        limit = settings.BROWSER_MAX_MB
        if limit and charged_bytes > limit * 1024 * 1024 and self.recycle_due is None and self.state == BrowserState.UP:
            log.info("browser memory %.0f MB passed BROWSER_MAX_MB (%g): recycling it when idle", charged_bytes / 2**20, limit)
            self.recycle_due = Cause.MEMORY
        self.recycle_if_due()

    def recycle_if_due(self) -> bool:
        """Begin a due recycle when no page is in use; never under a call or job."""
        if self.recycle_due is None or self.state != BrowserState.UP or self._stopped:
            return False
        if self.listener is None or not self.listener.idle():
            return False
        log.info("recycling the browser (%s) after %d calls", self.recycle_due, self.calls_since_launch)
        self._begin_relaunch(self.recycle_due)
        return True

    # --- reading and closing -------------------------------------------------------

    async def memory(self) -> dict[str, int]:
        """The browser's processes' resident memory, in bytes (Linux /proc)."""
        return {"rss_bytes": resident_bytes()}

    async def _shut_down(self) -> None:
        """Close the context (if it still runs) and stop the driver, quietly."""
        self._closing = True
        try:
            if self.context is not None:
                try:
                    await asyncio.wait_for(self.context.close(), 15)
                except Exception as error:
                    log.warning("closing the browser context failed: %s", error_line(error))
                self.context = None
            if self._playwright is not None:
                try:
                    await asyncio.wait_for(self._playwright.stop(), 15)
                except Exception as error:
                    log.warning("stopping the Playwright driver failed: %s", error_line(error))
                self._playwright = None
        finally:
            self._closing = False

    async def stopping(self) -> None:
        """The worker begins to stop: no relaunch nor recycle from here on,
        and one in progress is cancelled (its failure would be no failure)."""
        self._stopped = True
        if self._relaunch is not None and not self._relaunch.done():
            self._relaunch.cancel()
            await asyncio.gather(self._relaunch, return_exceptions=True)

    async def close(self) -> None:
        """At the worker's stop, last: the browser closes."""
        started = self.context is not None
        await self.stopping()
        await self._shut_down()
        if self.egress is not None:
            self.egress.close()
            self.egress = None
        await self.tap.close()
        if started:
            log.info("browser closed")


def _main_frame_navigation_tab(request: Request) -> Page | None:
    try:
        if request.is_navigation_request() and request.frame.parent_frame is None:
            return request.frame.page
    except Exception:  # a service worker's request has no frame
        return None
    return None
