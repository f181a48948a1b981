"""A user's family that takes parameters it does not declare
(`extra_params=True`), for tests/test_strict_params.py; loaded through
PENELOPE_PLUGINS like any user's family."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page
from rest_framework import serializers

from plugins.framework import Context, Family

family = Family("open", extra_params=True)


class EchoParams(serializers.Serializer):
    count = serializers.IntegerField(min_value=0, default=1)


@family.action("echo", params=EchoParams)
async def echo(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Answers the parameters it got, declared and not."""
    return {"params": params}


@family.action("strict", params=EchoParams, extra_params=False)
async def strict(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """An action of the family that says otherwise: only what it declares."""
    return {"params": params}
