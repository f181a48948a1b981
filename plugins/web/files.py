"""The `web` actions that answer files: screenshots and PDFs."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page
from rest_framework import serializers

from plugins.framework import Context
from plugins.web.base import ReadParams, action, first_match, wait_for


class ScreenshotParams(ReadParams):
    full_page = serializers.BooleanField(default=False)
    selector = serializers.CharField(max_length=1000, required=False)


@action("screenshot", params=ScreenshotParams)
async def screenshot(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await wait_for(page, params.get("wait_for"))
    if params.get("selector"):
        data = await (await first_match(page, params["selector"])).screenshot(type="png")
    else:
        data = await page.screenshot(type="png", full_page=params["full_page"])
    return {"media": await ctx.put_media(data, content_type="image/png", filename="screenshot.png")}


class PdfParams(ReadParams):
    pass


@action("pdf", params=PdfParams)
async def pdf(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await wait_for(page, params.get("wait_for"))
    data = await page.pdf(print_background=True)
    return {"media": await ctx.put_media(data, content_type="application/pdf", filename="page.pdf")}
