"""A family that declares its version, for the tests of family versions on jobs."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

from plugins.framework import Context, Family

family = Family("versioned", version="2.1.0")


@family.action("title")
async def title(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"title": await page.title()}
