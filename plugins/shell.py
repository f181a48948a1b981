"""One action on a browser of its own, for `manage.py run_action`.

An author iterating on a flow runs one action from a terminal and reads its
answer, without a worker, a key or a job. The browser is a fresh Chromium
with a throwaway context, so a worker running on the same store is never
disturbed; `profile=True` uses the persona's profile instead (its cookies),
and is refused while a worker holds it. Files the action stores go to a
folder of the shell's, never into the worker's media store.

The shell's browser opens private addresses even where a worker's is set to
refuse them (BROWSER_REFUSE_PRIVATE): an author's fixture pages are on
loopback or in files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from browser.flags import CHROMIUM_ARGS, set_driver_options
from browser.launch import BrowserNotFound, find_executable, proxy_settings
from browser.processes import clear_stale_profile_lock, profile_holder
from core import store_lock
from core.api import error_line, first_line
from plugins.framework import Action, Context, families, find_action
from plugins.running import Outcome, run_action

log = logging.getLogger("penelope.plugins")

CLOSE_TIMEOUT_S = 15  # closing the context, then the browser; past it the driver's exit kills Chromium


class ShellCannotRun(Exception):
    """The shell cannot run as asked; the message says why and what to do."""


@dataclass
class ShellContext(Context):
    """A context whose files go to `media_dir` as they are, linked by file URL."""

    media_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="penelope-media-")))

    def _free_name(self, filename: str) -> Path:
        self.media_dir.mkdir(parents=True, exist_ok=True)
        stem, suffix = os.path.splitext(Path(filename).name or "file")
        target, n = self.media_dir / f"{stem}{suffix}", 1
        while target.exists():  # two files of one name are both kept
            n += 1
            target = self.media_dir / f"{stem}-{n}{suffix}"
        return target

    async def put_media(self, data: bytes, *, content_type: str, filename: str) -> dict[str, Any]:
        target = self._free_name(filename)
        target.write_bytes(data)
        return {"url": target.resolve().as_uri(), "expires_at": None, "content_type": content_type, "size": len(data)}


    async def put_media_file(self, path: Path, *, size: int, content_type: str, filename: str) -> dict[str, Any]:
        target = self._free_name(filename)
        shutil.move(path, target)
        return {"url": target.resolve().as_uri(), "expires_at": None, "content_type": content_type, "size": size}


def find(route: str) -> Action:
    """The action `family/action` names, or ShellCannotRun naming what there is."""
    family, slash, name = route.partition("/")
    found = find_action(family, name) if slash else None
    if found is None:
        loaded = families()
        if family in loaded:
            raise ShellCannotRun(f"The family {family} has no action {name!r}; it has {', '.join(sorted(loaded[family].actions))}.")
        raise ShellCannotRun(
            f"No action {route}: the families loaded (PENELOPE_PLUGINS) are {', '.join(sorted(loaded)) or 'none'}; "
            "name one as family/action."
        )
    return found


def parameters(json_body: str | None, pairs: list[str]) -> dict[str, Any]:
    """`--json` as a body, then each `--param key=value` as a query parameter over it."""
    data: dict[str, Any] = {}
    if json_body is not None:
        try:
            data = json.loads(json_body)
        except ValueError as error:
            raise ShellCannotRun(f"--json is not JSON: {error}.") from None
        if not isinstance(data, dict):
            raise ShellCannotRun("--json must be a JSON object, like a POST body: '{\"limit\": 20}'.")
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise ShellCannotRun(f"--param takes key=value, as in a query string; got {pair!r}.")
        data[key] = value
    return data


def check_headed(headed: bool) -> None:
    if headed and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ShellCannotRun(
            "--headed needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set: run it in a desktop "
            "session (or under xvfb-run), or without --headed."
        )


def hold_profile() -> int:
    """Take the store's lock for as long as the shell uses the persona's
    profile (answering its descriptor), as `recover_jobs` does: refused while
    a worker serves the store, even between two of its browser's launches, and
    a worker started meanwhile is refused until the shell is done. A Chromium
    of anyone else's on the profile is refused too."""
    stop_it = "stop it, or drop --profile to run on a browser of the shell's own."
    try:
        lock = store_lock.acquire("run_action")  # one word: the lock file splits on spaces
    except store_lock.StoreInUse as refused:
        if refused.command == "serve":
            raise ShellCannotRun(
                f"A worker (pid {refused.pid}) is using the persona's profile ({settings.PROFILE_DIR}): {stop_it}"
            ) from None
        raise ShellCannotRun(str(refused)) from None
    if (pid := profile_holder(settings.PROFILE_DIR)) is not None:
        store_lock.release(lock)
        raise ShellCannotRun(f"The persona's profile ({settings.PROFILE_DIR}) is open in process {pid}: {stop_it}")
    return lock


@dataclass
class Shell:
    action: Action
    params: dict[str, Any]
    url: str | None = None
    headed: bool = False
    trace: Path | None = None
    profile: bool = False
    media_dir: Path | None = None
    # Whether `trace` holds this run's trace (a file left by an earlier run does not count).
    trace_written: bool = field(default=False, init=False)

    async def run(self) -> Outcome:
        """Launch, open `url`, run the action, and close, whatever happens;
        the trace, if asked for, is written whatever the outcome."""
        lock = hold_profile() if self.profile else None
        try:
            set_driver_options()
            async with async_playwright() as playwright:
                browser, context = await self._launch(playwright)
                try:
                    return await self._traced(context)
                finally:
                    await _close(context, browser)
        finally:
            if lock is not None:
                store_lock.release(lock)

    async def _launch(self, playwright: Playwright) -> tuple[Browser | None, BrowserContext]:
        """Chromium as the worker launches it (browser/runner.py), with a
        context of its own, or on the persona's profile."""
        try:
            executable = find_executable(playwright)
        except BrowserNotFound as error:
            raise ShellCannotRun(str(error)) from None
        args = list(CHROMIUM_ARGS) + ([] if settings.CHROMIUM_SANDBOX else ["--no-sandbox"])
        options = {"executable_path": executable, "headless": not self.headed, "args": args,
                   "proxy": proxy_settings(settings.PENELOPE_PROXY)}
        limit = settings.BROWSER_LAUNCH_TIMEOUT_S
        try:
            if self.profile:
                settings.PROFILE_DIR.mkdir(parents=True, exist_ok=True)
                clear_stale_profile_lock(settings.PROFILE_DIR)  # a killed worker's; a live one was refused
                launching = playwright.chromium.launch_persistent_context(str(settings.PROFILE_DIR), **options)
                return None, await asyncio.wait_for(launching, limit)
            browser = await asyncio.wait_for(playwright.chromium.launch(**options), limit)
        except TimeoutError:
            raise ShellCannotRun(f"Chromium did not start within {limit:g} s (BROWSER_LAUNCH_TIMEOUT_S).") from None
        except PlaywrightError as error:
            raise ShellCannotRun(f"Chromium did not start: {first_line(error.message)}") from None
        try:
            return browser, await asyncio.wait_for(browser.new_context(), limit)
        except BaseException:
            await _close(None, browser)
            raise

    async def _traced(self, context: BrowserContext) -> Outcome:
        if self.trace is not None:
            await context.tracing.start(title=self.action.route, screenshots=True, snapshots=True, sources=False)
        try:
            page = context.pages[0] if context.pages else await context.new_page()
            if self.url:
                await self._open(page)
            ctx = ShellContext(page_id="shell", **({"media_dir": self.media_dir} if self.media_dir else {}))
            return await run_action(self.action, page, self.params, ctx)
        finally:
            if self.trace is not None:
                await self._stop_tracing(context)

    async def _stop_tracing(self, context: BrowserContext) -> None:
        # A trace that cannot be written (a browser that crashed) costs the
        # trace, not the answer in hand; the command says the file is missing.
        try:
            self.trace.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.wait_for(context.tracing.stop(path=self.trace), CLOSE_TIMEOUT_S)
            self.trace_written = True
        except (OSError, TimeoutError, PlaywrightError) as error:
            log.warning("the trace %s could not be written: %s", self.trace, error_line(error))

    async def _open(self, page: Page) -> None:
        # goto has Playwright's own deadline (30 s), and says so when it passes.
        try:
            await page.goto(self.url, wait_until="domcontentloaded")
        except PlaywrightError as error:
            raise ShellCannotRun(f"--url {self.url} did not open, so the action did not run: {first_line(error.message)}") from None


async def _close(context: BrowserContext | None, browser: Browser | None) -> None:
    """Close quietly, each step within CLOSE_TIMEOUT_S: the answer (or the
    error) in hand is what the author needs to see."""
    for closing in (context, browser):
        if closing is None:
            continue
        try:
            await asyncio.wait_for(closing.close(), CLOSE_TIMEOUT_S)
        except (TimeoutError, PlaywrightError) as error:
            log.warning("closing the shell's browser failed: %s", error_line(error))
