"""Primitives: one low-level page step each, always synchronous.

They run through the same framework as plugin actions (validation, time
limits, the page lock, leases), but never as jobs.
"""

from __future__ import annotations

import json
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from rest_framework import serializers

from core.shapes import Flag, NavigationUrl, Text
from plugins.framework import Context, Family, PluginError

primitives = Family("primitive")

TIMEOUT_MS = serializers.IntegerField(min_value=0, max_value=600_000, default=30_000)


class GotoParams(serializers.Serializer):
    url = NavigationUrl()
    wait_until = serializers.ChoiceField(choices=["load", "domcontentloaded", "networkidle", "commit"], default="load")
    timeout_ms = TIMEOUT_MS


@primitives.action("goto", params=GotoParams)
async def goto(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    response = await page.goto(params["url"], wait_until=params["wait_until"], timeout=params["timeout_ms"])
    return {"url": page.url, "status": response.status if response else None}


class SelectorParams(serializers.Serializer):
    selector = Text(max_length=1000)
    timeout_ms = TIMEOUT_MS


@primitives.action("click", params=SelectorParams)
async def click(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await page.click(params["selector"], timeout=params["timeout_ms"])
    return {"url": page.url}


class FillParams(SelectorParams):
    value = Text(max_length=100_000, allow_blank=True)


@primitives.action("fill", params=FillParams)
async def fill(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await page.fill(params["selector"], params["value"], timeout=params["timeout_ms"])
    return {}


class PressParams(serializers.Serializer):
    key = Text(max_length=100)
    selector = Text(max_length=1000, required=False)
    timeout_ms = TIMEOUT_MS


@primitives.action("press", params=PressParams)
async def press(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    try:
        if params.get("selector"):
            await page.press(params["selector"], params["key"], timeout=params["timeout_ms"])
        else:
            await page.keyboard.press(params["key"])
    except PlaywrightError as error:
        if "Unknown key" in error.message:
            raise PluginError(400, f"Unknown key {params['key']!r}.") from None
        raise
    return {"url": page.url}


class ScrollParams(serializers.Serializer):
    dx = serializers.IntegerField(default=0, min_value=-1_000_000, max_value=1_000_000)
    dy = serializers.IntegerField(default=0, min_value=-1_000_000, max_value=1_000_000)
    to = serializers.ChoiceField(choices=["top", "bottom"], required=False)


@primitives.action("scroll", params=ScrollParams)
async def scroll(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    position = await page.evaluate(
        """([dx, dy, to]) => { const el = document.scrollingElement || document.documentElement;
        if (to === "top") window.scrollTo(0, 0);
        else if (to === "bottom") window.scrollTo(0, el.scrollHeight);
        else window.scrollBy(dx, dy);
        return {x: window.scrollX, y: window.scrollY, height: el.scrollHeight}; }""",
        [params["dx"], params["dy"], params.get("to")],
    )
    return {"scroll": position}


class WaitParams(serializers.Serializer):
    ms = serializers.IntegerField(min_value=0, max_value=600_000, required=False, help_text="Not with selector.")
    selector = Text(max_length=1000, required=False, help_text="Give ms or selector, one of the two.")
    state = serializers.ChoiceField(choices=["attached", "detached", "visible", "hidden"], default="visible")
    timeout_ms = TIMEOUT_MS

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("ms" in data) == ("selector" in data):
            raise serializers.ValidationError("give either ms or selector.")
        return data


@primitives.action("wait", params=WaitParams)
async def wait(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if "ms" in params:
        await page.wait_for_timeout(params["ms"])
        return {"waited_ms": params["ms"]}
    await page.wait_for_selector(params["selector"], state=params["state"], timeout=params["timeout_ms"])
    return {"selector": params["selector"], "state": params["state"]}


class EvaluateParams(serializers.Serializer):
    expression = Text(max_length=100_000)


@primitives.action("evaluate", params=EvaluateParams)
async def evaluate(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"value": await evaluate_json(page, params["expression"])}


async def evaluate_json(page: Page, expression: str, arg: Any = None) -> Any:
    """The expression's value (a function is called with `arg`; a Promise is
    awaited), or 400 when it throws or its value is not JSON."""
    try:
        value = await page.evaluate(expression, arg)
    except PlaywrightError as error:
        if page.is_closed():
            raise
        raise PluginError(400, f"The expression failed: {error.message.splitlines()[0][:300]}") from None
    try:
        json.dumps(value, allow_nan=False)  # NaN and Infinity are not JSON
    except (TypeError, ValueError):
        raise PluginError(400, "The expression's value cannot be sent as JSON.") from None
    return value


@primitives.action("content")
async def content(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"html": await page.content(), "url": page.url, "title": await page.title()}


class ScreenshotParams(serializers.Serializer):
    full_page = Flag(default=False)


@primitives.action("screenshot", params=ScreenshotParams)
async def screenshot(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    data = await page.screenshot(type="png", full_page=params["full_page"])
    return {"media": await ctx.put_media(data, content_type="image/png", filename="screenshot.png")}
