"""Where the persona's Chromium comes from and which proxy it is told to
use: shared by the worker's browser (browser/runner.py) and the authors'
shell (plugins/shell.py)."""

from __future__ import annotations

import os
import shutil
from urllib.parse import unquote, urlsplit

from django.conf import settings
from playwright.async_api import Playwright

SYSTEM_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

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
