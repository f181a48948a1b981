"""The `bench` family: plugin actions that do nothing, loaded through
PENELOPE_PLUGINS like any user's family, so a job's own overhead can be
measured without a browser step in it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from playwright.async_api import Page

from plugins.framework import Context, Family

family = Family("bench")

# Long enough that a job is still running when its 202 goes out, as any real
# plugin is; short enough for a thousand in a row.
HOLD_S = 0.02


@family.action("noop")
async def noop(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Answer at once without touching the page."""
    return {}


@family.action("hold")
async def hold(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Hold the page 20 ms without touching it; answers when it let go (epoch seconds)."""
    await asyncio.sleep(HOLD_S)
    return {"ended": time.time()}


@family.action("browser-wait")
async def browser_wait(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Wait a minute inside the browser: the plugin a cancel stops."""
    await page.wait_for_timeout(60_000)
    return {}
