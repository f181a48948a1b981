"""The persona's browser: one persistent Chromium context on `store/profile`.

Playwright objects are created and touched only on the worker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings
from playwright.async_api import BrowserContext, Page, Playwright, async_playwright

log = logging.getLogger("penelope.browser")

SYSTEM_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Chromium's own traffic (updates, sync, metrics) has no business on a
# persona's connection, and in closed networks it only produces errors.
CHROMIUM_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--disable-gpu",
]


class BrowserNotFound(RuntimeError):
    """No Chromium executable could be found; the message says what was tried."""


def find_executable(playwright: Playwright) -> str:
    """PENELOPE_BROWSER when set, else Playwright's own Chromium, else a system one."""
    if settings.PENELOPE_BROWSER:
        path = settings.PENELOPE_BROWSER
        if os.access(path, os.X_OK):
            return path
        raise BrowserNotFound(f"PENELOPE_BROWSER is set to {path}, which is not an executable file.")
    tried = []
    own = playwright.chromium.executable_path
    if own and os.access(own, os.X_OK):
        return own
    tried.append(f"Playwright's Chromium at {own}")
    for name in SYSTEM_CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    tried.append(f"{', '.join(SYSTEM_CHROMIUM_NAMES)} on PATH")
    raise BrowserNotFound(
        f"No Chromium found (tried {'; '.join(tried)}): install one "
        "(`playwright install chromium` or the distribution's chromium package) or set PENELOPE_BROWSER."
    )


def proxy_settings(proxy_url: str) -> dict[str, str] | None:
    """`scheme://user:pass@host:port` as Playwright's proxy dict."""
    if not proxy_url:
        return None
    parts = urlsplit(proxy_url)
    if not parts.scheme or not parts.hostname:
        raise ValueError("PENELOPE_PROXY must look like scheme://user:pass@host:port.")
    server = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    proxy = {"server": server}
    if parts.username:
        proxy["username"] = unquote(parts.username)
    if parts.password:
        proxy["password"] = unquote(parts.password)
    return proxy


def clear_stale_profile_lock(profile_dir: Path) -> None:
    """Remove Chromium's singleton lock when the process that held it is gone.

    A worker killed with SIGKILL leaves `SingletonLock` behind
    (a symlink to `host-pid`); a live holder is left alone.
    """
    lock = profile_dir / "SingletonLock"
    try:
        target = os.readlink(lock)
    except OSError:
        return
    pid_text = target.rpartition("-")[2]
    if pid_text.isdigit() and _process_alive(int(pid_text)):
        return
    for name in ("SingletonLock", "SingletonSocket", "SingletonCookie"):
        try:
            os.unlink(profile_dir / name)
        except OSError:
            pass
    log.info("removed a stale profile lock left by process %s", pid_text)


def _process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


class Browser:
    """Starts and stops the persistent context; hands out new tabs."""

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self.context: BrowserContext | None = None
        self.executable = ""

    async def start(self) -> Page:
        """Launch Chromium and answer its first tab."""
        self._playwright = await async_playwright().start()
        try:
            self.executable = find_executable(self._playwright)
            profile = settings.PROFILE_DIR
            profile.mkdir(parents=True, exist_ok=True)
            clear_stale_profile_lock(profile)
            args = list(CHROMIUM_ARGS)
            if not settings.CHROMIUM_SANDBOX:
                args.append("--no-sandbox")  # off by default as root, where Chromium refuses to sandbox
            self.context = await asyncio.wait_for(
                self._playwright.chromium.launch_persistent_context(
                    str(profile),
                    executable_path=self.executable,
                    headless=settings.PENELOPE_HEADLESS,
                    proxy=proxy_settings(settings.PENELOPE_PROXY),
                    args=args,
                ),
                settings.BROWSER_LAUNCH_TIMEOUT_S,
            )
        except BaseException:
            await self._playwright.stop()
            self._playwright = None
            raise
        log.info("browser started: %s", self.executable)
        if self.context.pages:
            return self.context.pages[0]
        return await self.new_tab()

    async def new_tab(self) -> Page:
        assert self.context is not None, "the browser is not started"
        return await asyncio.wait_for(self.context.new_page(), settings.BROWSER_LAUNCH_TIMEOUT_S)

    async def memory(self) -> dict[str, int]:
        """The browser's processes' resident memory, in bytes (Linux /proc)."""
        return {"rss_bytes": resident_bytes()}

    async def close(self) -> None:
        started = self.context is not None
        if self.context is not None:
            try:
                await asyncio.wait_for(self.context.close(), 15)
            except Exception:
                log.exception("closing the browser context failed")
            self.context = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None
        if started:
            log.info("browser closed")


def resident_bytes() -> int:
    """The resident memory of the worker's browser processes, in bytes (Linux
    /proc): a read of every process's stat, so callers off the loop may prefer
    a thread."""
    return sum(_rss(pid) for pid in _descendants(os.getpid()) if _is_browser(pid))


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _is_browser(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            name = comm.read().strip()
    except OSError:
        return False
    return "chrom" in name or name == "headless_shell"


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
