"""A family for the credential tests, loaded through PENELOPE_PLUGINS like
any user's: an action that types a credential with `fill_form` and leaves
its refusals to the framework, as a plugin author's action may."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page
from rest_framework import serializers

from plugins.framework import Context, Family
from plugins.signing_in import fill_form

family = Family("credtest")


class TypeParams(serializers.Serializer):
    credential = serializers.RegexField(r"^[a-z0-9_-]{1,64}$")
    password_selector = serializers.CharField(max_length=1000)
    frame = serializers.CharField(max_length=1000, required=False)


@family.action("type-password", params=TypeParams)
async def type_password(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Type the credential's password where `password_selector` says (in the
    iframe `frame` names, when given); nothing caught."""
    account = await ctx.credential(params["credential"])
    done = await fill_form(page, account, {"password": params["password_selector"]}, None, frame=params.get("frame"))
    return {"filled": done["filled"]}
