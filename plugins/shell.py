"""One action on a browser of its own, for `manage.py run_action`.

An author iterating on a flow runs one action from a terminal and reads its
answer, without a worker, a key or a job. The browser is a fresh Chromium
with a throwaway context, so a worker running on the same store is never
disturbed; `profile=True` uses the persona's profile instead (its cookies),
and is refused while a worker holds it. Files the action stores go to a
folder of the shell's, never into the worker's media store.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from playwright.async_api import async_playwright

from browser.runner import CHROMIUM_ARGS, find_executable, proxy_settings
from plugins.framework import Action, Context, Outcome, families, find_action, run_action

# Chromium's lock in a profile it has open: a link to "<host>-<pid>".
PROFILE_LOCK = "SingletonLock"


class ShellRefused(Exception):
    """The shell cannot run as asked; the message says why and what to do."""


@dataclass
class ShellContext(Context):
    """A context whose files go to `media_dir` as they are, linked by file URL."""

    media_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="penelope-media-")))

    async def put_media(self, data: bytes, *, content_type: str, filename: str) -> dict[str, Any]:
        self.media_dir.mkdir(parents=True, exist_ok=True)
        stem, suffix = os.path.splitext(Path(filename).name or "file")
        target, n = self.media_dir / f"{stem}{suffix}", 1
        while target.exists():  # two files of one name are both kept
            n += 1
            target = self.media_dir / f"{stem}-{n}{suffix}"
        target.write_bytes(data)
        return {"url": target.resolve().as_uri(), "expires_at": None, "content_type": content_type, "size": len(data)}


def find(route: str) -> Action:
    """The action `family/action` names, or ShellRefused naming what there is."""
    family, slash, name = route.partition("/")
    found = find_action(family, name) if slash else None
    if found is None:
        loaded = families()
        if family in loaded:
            raise ShellRefused(f"The family {family} has no action {name!r}; it has {', '.join(sorted(loaded[family].actions))}.")
        raise ShellRefused(
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
            raise ShellRefused(f"--json is not JSON: {error}.") from None
        if not isinstance(data, dict):
            raise ShellRefused("--json must be a JSON object, like a POST body: '{\"limit\": 20}'.")
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise ShellRefused(f"--param takes key=value, as in a query string; got {pair!r}.")
        data[key] = value
    return data


def profile_holder(profile: Path) -> int | None:
    """The live process that holds the profile open, if one does."""
    try:
        target = os.readlink(profile / PROFILE_LOCK)
    except OSError:
        return None
    pid = target.rpartition("-")[2]
    if pid.isdigit() and Path(f"/proc/{pid}").exists():
        return int(pid)
    return None


def check_headed(headed: bool) -> None:
    if headed and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ShellRefused(
            "--headed needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set: run it in a desktop "
            "session (or under xvfb-run), or without --headed."
        )


@dataclass
class Shell:
    action: Action
    params: dict[str, Any]
    url: str | None = None
    headed: bool = False
    trace: Path | None = None
    profile: bool = False
    media_dir: Path | None = None

    async def run(self) -> Outcome:
        """Launch, run the action (after `url`), and close, whatever happens."""
        if self.profile and (pid := profile_holder(settings.PROFILE_DIR)) is not None:
            raise ShellRefused(
                f"The persona's profile ({settings.PROFILE_DIR}) is in use by process {pid}, a running worker: "
                "stop it, or run without --profile on a browser of the shell's own."
            )
        async with async_playwright() as playwright:
            args = list(CHROMIUM_ARGS) + ([] if settings.CHROMIUM_SANDBOX else ["--no-sandbox"])
            options = {"executable_path": find_executable(playwright), "headless": not self.headed, "args": args,
                       "proxy": proxy_settings(settings.PENELOPE_PROXY)}
            browser = None
            if self.profile:
                settings.PROFILE_DIR.mkdir(parents=True, exist_ok=True)
                context = await playwright.chromium.launch_persistent_context(str(settings.PROFILE_DIR), **options)
            else:
                browser = await playwright.chromium.launch(**options)
                context = await browser.new_context()
            try:
                if self.trace is not None:
                    await context.tracing.start(title=self.action.route, screenshots=True, snapshots=True)
                try:
                    page = context.pages[0] if context.pages else await context.new_page()
                    if self.url:
                        await page.goto(self.url, wait_until="domcontentloaded")
                    ctx = ShellContext(page_id="shell", **({"media_dir": self.media_dir} if self.media_dir else {}))
                    return await run_action(self.action, page, self.params, ctx)
                finally:
                    if self.trace is not None:
                        await context.tracing.stop(path=self.trace)
            finally:
                await context.close()
                if browser is not None:
                    await browser.close()
