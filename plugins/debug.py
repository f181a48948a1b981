"""What a run leaves behind when asked (`X-Debug`, `DEBUG_ARTIFACTS`).

A call asked to keep them is watched from its start: the tab's console
messages and page errors, the requests that failed or answered 400 and up,
and a Playwright trace of the browser context. When the action ends, and
`always` or its answer is a failure (`on-failure`), a screenshot and the HTML
of the page are taken and the five are stored as the run's media: the answer
gains `artifacts`, their links. Otherwise everything is dropped. A call that
did not ask has no listener and no trace: it costs nothing.

A trace covers the whole browser context, which the persona's pages share;
Playwright records one at a time, so a call whose trace cannot start (another
call records one) gets the rest without it, and `notes` says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
import weakref
from collections.abc import Collection
from pathlib import Path
from typing import Any

from django.conf import settings
from playwright.async_api import BrowserContext, ConsoleMessage, Page, Request, Response
from playwright.async_api import Error as PlaywrightError

from core.api import ApiError, first_line
from core.errors import Refusal
from core.runtime import Tasks
from plugins.scrub import scrubbed

log = logging.getLogger("penelope.plugins")

HEADER = "X-Debug"
OFF, ON_FAILURE, ALWAYS = "off", "on-failure", "always"
MODES = (OFF, ON_FAILURE, ALWAYS)
# Entries kept of each log, and characters of each text: a page that logs in
# a loop cannot fill the store.
MAX_ENTRIES = 1000
MAX_TEXT = 2000
# How long each capture at the end may take: a page that hangs the renderer
# does not hold its call.
CAPTURE_TIMEOUT_S = 10
ARTIFACTS = ("screenshot", "html", "console", "network", "trace")


def parse_mode(raw: str | None) -> str | None:
    """X-Debug as sent, or 400. None: not sent (DEBUG_ARTIFACTS decides).
    Spelled as documented (and as the OpenAPI enum says): `ALWAYS` is
    refused, as every word value of the API is matched exactly."""
    if raw is None:
        return None
    mode = raw.strip()
    if mode not in MODES:
        raise ApiError(400, f"{HEADER} must be one of {', '.join(MODES)}.")
    return mode


def effective(mode: str | None) -> str | None:
    """The mode a run records in: the header's, else the worker's default; None when off."""
    chosen = mode or settings.DEBUG_ARTIFACTS
    return None if chosen == OFF else chosen


def clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


class Recorder:
    """One run's watch on its tab, from `begin` to `finish` (or `discard`)."""

    def __init__(
        self, mode: str, tab: Page, title: str, tracing: weakref.WeakSet[BrowserContext], tasks: Tasks
    ) -> None:
        """`tracing`: the browser contexts whose trace a call records now, the
        worker's (Playwright records one at a time); `tasks`, the worker's."""
        self.mode = mode
        self.tracing, self.tasks = tracing, tasks
        self.tab = tab
        self.title = title
        self.began = time.time()
        self.console: list[dict[str, Any]] = []
        self.page_errors: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.context: BrowserContext | None = None  # set while this run records the trace
        self.done = False
        self._listeners = (
            ("console", self._console), ("pageerror", self._page_error),
            ("requestfailed", self._request_failed), ("response", self._response),
        )

    def start(self) -> None:
        """Listen to the tab, and claim the context's trace if no other call
        records one. No await: a cancel cannot land between this and the
        caller holding the recorder, whose `discard` then undoes it all."""
        for event, listener in self._listeners:
            self.tab.on(event, listener)
        context = self.tab.context
        if context in self.tracing:
            self.notes.append("No trace: another call on this browser was recording one (one at a time).")
            return
        self.tracing.add(context)
        self.context = context

    async def start_trace(self) -> None:
        context = self.context
        if context is None:
            return
        try:
            async with asyncio.timeout(CAPTURE_TIMEOUT_S):
                await context.tracing.start(title=self.title, screenshots=True, snapshots=True)
        except (PlaywrightError, TimeoutError) as error:
            self.context = None
            reason = first_line(error.message) if isinstance(error, PlaywrightError) else "it did not start in time"
            self.notes.append(f"No trace: the browser refused to record one ({reason}).")
            _release_later(context, self.tracing, self.tasks)

    # --- what the tab reports while the action runs ------------------------------------

    def _console(self, message: ConsoleMessage) -> None:
        if len(self.console) < MAX_ENTRIES:
            where = message.location or {}
            self.console.append({
                "at": round(time.time(), 3), "type": message.type, "text": clip(message.text),
                "url": where.get("url") or None, "line": where.get("lineNumber"),
            })

    def _page_error(self, error: PlaywrightError) -> None:
        if len(self.page_errors) < MAX_ENTRIES:
            self.page_errors.append({
                "at": round(time.time(), 3), "name": error.name or None, "message": clip(error.message),
                "stack": clip(error.stack),
            })

    def _request_failed(self, request: Request) -> None:
        self._request(request, failure=request.failure or "failed", status=None)

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self._request(response.request, failure=None, status=response.status)

    def _request(self, request: Request, *, failure: str | None, status: int | None) -> None:
        if len(self.requests) < MAX_ENTRIES:
            self.requests.append({
                "at": round(time.time(), 3), "method": request.method, "url": clip(request.url),
                "resource_type": request.resource_type, "status": status, "failure": failure,
            })

    # --- the end -----------------------------------------------------------------------

    def _stop_listening(self) -> None:
        for event, listener in self._listeners:
            self.tab.remove_listener(event, listener)

    async def _stop_trace(self, path: Path | None) -> bool:
        """Stop the trace this run records (into `path`, or dropped); whether it was written."""
        context, self.context = self.context, None
        if context is None:
            return False
        try:
            async with asyncio.timeout(CAPTURE_TIMEOUT_S):
                await context.tracing.stop(path=path)
        except (PlaywrightError, TimeoutError) as error:
            reason = first_line(error.message) if isinstance(error, PlaywrightError) else "it took too long"
            self.notes.append(f"No trace: it could not be saved ({reason}).")
            _release_later(context, self.tracing, self.tasks)
            return False
        self.tracing.discard(context)
        return path is not None

    async def discard(self) -> None:
        """Drop everything: the run did not end with an answer to keep them in."""
        if not self.done:
            self.done = True
            self._stop_listening()
            await self._stop_trace(None)

    async def finish(self, status: int, body: dict[str, Any], store_file, hidden: Collection[str] = ()) -> None:
        """Keep the artifacts when asked to (always, or a failure's), adding
        `artifacts` to `body`; `store_file(data, content_type=, filename=)` stores
        one and answers its link. The values in `hidden` (the credentials the
        run used) are taken out of every artifact first (plugins/scrub.py)."""
        if self.done:
            return
        keep = self.mode == ALWAYS or status >= 400
        if not keep:
            await self.discard()
            return
        self.done = True
        self._stop_listening()
        trace = await self._trace()  # it ends with the action, before the captures below
        files: dict[str, tuple[bytes, str, str] | None] = {
            "screenshot": await self._capture("a screenshot", self._screenshot),
            "html": await self._capture("the HTML", self._html),
            "console": _json_file({"console": self.console, "page_errors": self.page_errors}, "console.json"),
            "network": _json_file({"requests": self.requests}, "network.json"),
            "trace": trace,
        }
        artifacts: dict[str, Any] = dict.fromkeys(ARTIFACTS)
        for name, made in files.items():
            if made is None:
                continue
            data, content_type, filename = made
            if hidden:
                data = await asyncio.to_thread(scrubbed, data, content_type, hidden)
            try:
                artifacts[name] = await store_file(data, content_type=content_type, filename=filename)
            except Refusal as error:  # the media store is full (507)
                self.notes.append(f"No {name}: {error.message}")
            except Exception:  # a full disk, a locked database: the answer in hand is kept all the same
                log.exception("the %s of a debug recording could not be stored", name)
                self.notes.append(f"No {name}: it could not be stored; the details are in the worker's log.")
        if self.notes:
            artifacts["notes"] = self.notes
        body["artifacts"] = artifacts

    async def _capture(self, what: str, take) -> tuple[bytes, str, str] | None:
        try:
            async with asyncio.timeout(CAPTURE_TIMEOUT_S):
                return await take()
        except (PlaywrightError, TimeoutError) as error:
            reason = first_line(error.message) if isinstance(error, PlaywrightError) else "it took too long"
            self.notes.append(f"No {what.split()[-1]}: the page gave none ({reason}).")
            return None

    async def _screenshot(self) -> tuple[bytes, str, str]:
        return await self.tab.screenshot(type="png", timeout=CAPTURE_TIMEOUT_S * 1000), "image/png", "screenshot.png"

    async def _html(self) -> tuple[bytes, str, str]:
        return (await self.tab.content()).encode(), "text/html", "page.html"

    async def _trace(self) -> tuple[bytes, str, str] | None:
        if self.context is None:
            return None
        with tempfile.TemporaryDirectory(prefix="penelope-trace-") as folder:
            path = Path(folder) / "trace.zip"
            if not await self._stop_trace(path):
                return None
            data = await asyncio.to_thread(path.read_bytes)
        return data, "application/zip", "trace.zip"


def _release_later(context: BrowserContext, tracing: weakref.WeakSet[BrowserContext], tasks: Tasks) -> None:
    """A trace whose start or stop was given up on may still be running in
    the browser: stop it for good in the background, and only then let
    another call record one."""

    async def release() -> None:
        try:
            await context.tracing.stop()
        except PlaywrightError:
            pass  # stopped already, or the browser is gone
        finally:
            tracing.discard(context)

    tasks.spawn(release(), about="stopping an abandoned debug trace")


def _json_file(value: dict[str, Any], filename: str) -> tuple[bytes, str, str]:
    return json.dumps(value, indent=1).encode(), "application/json", filename
