"""The `web` family: generic actions for any site."""

from __future__ import annotations

import time
from typing import Any

from playwright.async_api import Page
from rest_framework import serializers

from plugins.framework import Context, Family, PluginError

family = Family("web")

WAIT_UNTIL = ["load", "domcontentloaded", "networkidle", "commit"]


class OpenParams(serializers.Serializer):
    url = serializers.URLField(max_length=4096)
    wait_until = serializers.ChoiceField(choices=WAIT_UNTIL, default="load")
    timeout_ms = serializers.IntegerField(min_value=1, max_value=600_000, default=30_000)


@family.action("open", params=OpenParams)
async def open_url(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    response = await page.goto(params["url"], wait_until=params["wait_until"], timeout=params["timeout_ms"])
    return {"url": page.url, "status": response.status if response else None, "title": await page.title()}


class TextParams(serializers.Serializer):
    selector = serializers.CharField(max_length=1000)
    all = serializers.BooleanField(default=False)
    timeout_ms = serializers.IntegerField(min_value=0, max_value=600_000, default=5_000)


@family.action("text", params=TextParams)
async def text(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    locator = page.locator(params["selector"])
    if params["all"]:
        return {"texts": [t.strip() for t in await locator.all_inner_texts()]}
    if await locator.count() == 0:
        raise PluginError(404, f"Nothing on the page matches {params['selector']!r}.")
    return {"text": (await locator.first.inner_text(timeout=params["timeout_ms"])).strip()}


@family.action("state")
async def state(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The family's state reader: what the page shows, changing nothing."""
    return {"url": page.url, "title": await page.title()}


class ScreenshotParams(serializers.Serializer):
    full_page = serializers.BooleanField(default=False)
    selector = serializers.CharField(max_length=1000, required=False)


@family.action("screenshot", params=ScreenshotParams)
async def screenshot(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if params.get("selector"):
        locator = page.locator(params["selector"]).first
        if await page.locator(params["selector"]).count() == 0:
            raise PluginError(404, f"Nothing on the page matches {params['selector']!r}.")
        data = await locator.screenshot(type="png")
    else:
        data = await page.screenshot(type="png", full_page=params["full_page"])
    return {"media": await ctx.put_media(data, content_type="image/png", filename="screenshot.png")}


@family.action("pdf")
async def pdf(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    data = await page.pdf(print_background=True)
    return {"media": await ctx.put_media(data, content_type="application/pdf", filename="page.pdf")}


class CollectParams(serializers.Serializer):
    item_selector = serializers.CharField(max_length=1000)
    attribute = serializers.CharField(max_length=200, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100_000, default=100)
    max_seconds = serializers.FloatField(min_value=0.1, max_value=3600, default=60)
    scroll_pause_ms = serializers.IntegerField(min_value=0, max_value=60_000, default=500)


# Reads every matching item's text (or attribute) in one round trip.
READ_ITEMS_JS = """([selector, attribute]) => Array.from(document.querySelectorAll(selector), el =>
    (attribute ? el.getAttribute(attribute) : el.innerText) || "").map(s => s.trim()).filter(Boolean)"""


@family.action("collect", params=CollectParams, timeout_s=lambda p: p["max_seconds"] + 30)
async def collect(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Scroll like a user and gather distinct items until the limit, the end of
    the list (a scroll that loads nothing new) or the time budget."""
    items: dict[str, None] = {}
    deadline = time.monotonic() + params["max_seconds"]
    selector, attribute, limit = params["item_selector"], params.get("attribute"), params["limit"]
    stopped_because = "time"
    scrolls = 0
    while True:
        before = len(items)
        for item in await page.evaluate(READ_ITEMS_JS, [selector, attribute]):
            items.setdefault(item)
        ctx.progress(done=min(len(items), limit), total=limit, message=f"{len(items)} items after {scrolls} scrolls")
        if len(items) >= limit:
            stopped_because = "limit"
            break
        if time.monotonic() >= deadline:
            break
        at_bottom_before = await _scroll_to_bottom(page)
        scrolls += 1
        await page.wait_for_timeout(params["scroll_pause_ms"])
        if len(items) == before and at_bottom_before and await _at_bottom(page):
            stopped_because = "end"
            break
    return {"items": list(items)[:limit], "count": min(len(items), limit), "stopped_because": stopped_because}


async def _scroll_to_bottom(page: Page) -> bool:
    """Scroll down one screen; answer whether the page was already at its bottom."""
    return await page.evaluate(
        """() => { const el = document.scrollingElement;
        const atBottom = el.scrollTop + window.innerHeight >= el.scrollHeight - 2;
        window.scrollBy(0, window.innerHeight); return atBottom; }"""
    )


async def _at_bottom(page: Page) -> bool:
    return await page.evaluate(
        "() => { const el = document.scrollingElement; return el.scrollTop + window.innerHeight >= el.scrollHeight - 2; }"
    )
