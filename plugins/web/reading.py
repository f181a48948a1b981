"""The `web` actions that open a page and read it: open, wait, text, content,
evaluate and state."""

from __future__ import annotations

import time
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from rest_framework import serializers

from core.shapes import Flag, NavigationUrl, Text
from plugins.framework import Context, PluginError
from plugins.primitives import evaluate_json
from plugins.web import network
from plugins.web.base import SELECTOR, ReadParams, WaitFor, WebParams, action, family, first_match, wait_for
from plugins.web.error_page import navigate, settle_after
from plugins.web.refresh import Navigations, follow_refresh

WAIT_UNTIL = ["load", "domcontentloaded", "networkidle", "commit"]


class OpenParams(ReadParams, network.CaptureParams):
    url = NavigationUrl()
    wait_until = serializers.ChoiceField(choices=WAIT_UNTIL, default="load")
    timeout_ms = serializers.IntegerField(min_value=1, max_value=600_000, default=30_000)
    require_ok = Flag(default=False)


@action("open", params=OpenParams)
async def open_url(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    began = time.monotonic()
    navigations = Navigations(page)
    try:
        async with network.capture(page, params, ctx) as captured:
            try:
                response = await navigate(
                    page, params["url"], wait_until=params["wait_until"], timeout=params["timeout_ms"]
                )
            except PlaywrightError as error:
                await settle_after(page, error)  # the next call meets the error page committed
                raise
            # A refresh that is a redirect is followed as one (plugins/web/refresh.py).
            left_ms = params["timeout_ms"] - (time.monotonic() - began) * 1000
            followed, refreshed = await follow_refresh(
                page, navigations, response, wait_until=params["wait_until"], timeout_ms=left_ms
            )
            if followed:
                response = refreshed
            status = response.status if response else None
            if params["require_ok"] and status is not None and status >= 400:
                raise PluginError(502, f"The site answered {status} for {page.url}.")
            await wait_for(page, params.get("wait_for"))
            answer = {"url": page.url, "status": status, "title": await page.title()}
    finally:
        navigations.close()
    return {**answer, **captured.answer()}


class WaitParams(WebParams, WaitFor):
    pass


@action("wait", params=WaitParams, timeout_s=lambda params: params["timeout_ms"] / 1000 + 30)
async def wait(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Wait for a selector's state or a function's truth; 408 when it does not come."""
    spec = {name: params[name] for name in ("selector", "state", "function", "timeout_ms") if name in params}
    await wait_for(page, spec)
    return {"url": page.url, **{name: spec[name] for name in ("selector", "state", "function") if name in spec}}


class TextParams(ReadParams):
    selector = SELECTOR
    all = Flag(default=False)
    timeout_ms = serializers.IntegerField(min_value=0, max_value=600_000, default=5_000)


@action("text", params=TextParams)
async def text(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await wait_for(page, params.get("wait_for"))
    locator = page.locator(params["selector"])
    if params["all"]:
        return {"texts": [t.strip() for t in await locator.all_inner_texts()]}
    found = await first_match(page, params["selector"])
    return {"text": (await found.inner_text(timeout=params["timeout_ms"])).strip()}


class ContentParams(ReadParams):
    selector = Text(max_length=1000, required=False)
    inner = Flag(default=False)


@action("content", params=ContentParams)
async def content(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The page's HTML as the browser holds it now, or one element's (outer,
    or inner with `inner`)."""
    await wait_for(page, params.get("wait_for"))
    if params.get("selector"):
        found = await first_match(page, params["selector"])
        html = await found.evaluate("(el, inner) => inner ? el.innerHTML : el.outerHTML", params["inner"])
    else:
        html = await page.content()
    return {"url": page.url, "title": await page.title(), "html": html}


class EvaluateParams(ReadParams):
    expression = Text(max_length=100_000)
    arg = serializers.JSONField(required=False, allow_null=True)


@action("evaluate", params=EvaluateParams)
async def evaluate(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """An expression's value, or a function's called with `arg`; a Promise is awaited."""
    await wait_for(page, params.get("wait_for"))
    return {"value": await evaluate_json(page, params["expression"], params.get("arg"))}


@family.action("state")
async def state(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The family's state reader: what the page shows, changing nothing."""
    return {"url": page.url, "title": await page.title()}
