"""The persona's own state in its browser profile: cookies and site storage.

Both live in the profile under `store/profile`, so what these actions set or
clear stays that way across calls and restarts, for every page of the worker.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Page
from rest_framework import serializers

from core.shapes import Flag, Text, Url
from plugins.framework import Context, PluginError
from plugins.web.base import family

SAME_SITE = ["Strict", "Lax", "None"]
# RFC 6265: a cookie's name is a token; its value has no controls, space, '"', ',', ';' or '\\'.
COOKIE_NAME = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
COOKIE_VALUE = r'[^\u0000-\u0020\u007f",;\\]*'


class Cookie(serializers.Serializer):
    name = Text(pattern=COOKIE_NAME, max_length=4096, invalid="a cookie name is a token (no spaces, ';' or '=').")
    value = Text(pattern=COOKIE_VALUE, max_length=4096, allow_blank=True,
                 invalid="a cookie value has no spaces, quotes, ',', ';' or '\\'.")  # fmt: skip
    url = Url(required=False, help_text="Not with domain; give url or domain.")
    domain = Text(max_length=255, required=False, help_text="Not with url; path goes with it (/ when left out).")
    path = Text(max_length=4096, required=False, help_text="With domain only.")
    expires = serializers.FloatField(
        min_value=0, max_value=253402300799, required=False, help_text="Unix seconds; left out, the cookie ends with the session."
    )
    http_only = Flag(required=False)
    secure = Flag(required=False)
    same_site = serializers.ChoiceField(choices=SAME_SITE, required=False, help_text="None needs secure: true.")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("url" in data) == ("domain" in data):
            raise serializers.ValidationError("give a cookie either url or domain (with path).")
        if "url" in data and "path" in data:
            raise serializers.ValidationError("path goes with domain; a url sets its own.")
        if "domain" in data:
            data.setdefault("path", "/")
        if data.get("same_site") == "None" and not data.get("secure"):
            raise serializers.ValidationError("same_site None needs secure: true (browsers drop it otherwise).")
        return data


class CookiesParams(serializers.Serializer):
    op = serializers.ChoiceField(choices=["list", "set", "clear"], default="list")
    url = Url(required=False, help_text="list and clear: the cookies sent to this URL.")
    name = Text(max_length=4096, required=False, help_text="list and clear: only cookies of this name.")
    cookies = serializers.ListField(child=Cookie(), min_length=1, max_length=500, required=False,
                                    help_text="With op set only, which needs it.")  # fmt: skip

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if (data["op"] == "set") != ("cookies" in data):
            raise serializers.ValidationError("cookies goes with op set, and op set needs cookies.")
        if data["op"] == "set" and ("url" in data or "name" in data):
            raise serializers.ValidationError("op set takes cookies only; each cookie names its url or domain.")
        return data


PLAYWRIGHT_KEYS = {"http_only": "httpOnly", "same_site": "sameSite"}


# A cookie's value lets its holder pass for the persona on its site: a read key sees "…".
@family.action("cookies", params=CookiesParams, secret=["cookies.*.value"])
async def cookies(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """List, set or clear the persona's cookies (for one URL, or all of them)."""
    context = page.context
    if params["op"] == "set":
        await context.add_cookies([{PLAYWRIGHT_KEYS.get(k, k): v for k, v in cookie.items()} for cookie in params["cookies"]])
        return {"set": len(params["cookies"])}
    found = await context.cookies([params["url"]] if "url" in params else [])
    if "name" in params:
        found = [cookie for cookie in found if cookie["name"] == params["name"]]
    if params["op"] == "list":
        return {"cookies": [shown(cookie) for cookie in found]}
    if "url" not in params and "name" not in params:
        await context.clear_cookies()
    else:
        for cookie in found:
            await context.clear_cookies(name=cookie["name"], domain=cookie["domain"], path=cookie["path"])
    return {"cleared": len(found)}


def shown(cookie: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": cookie["name"],
        "value": cookie["value"],
        "domain": cookie["domain"],
        "path": cookie["path"],
        "expires": None if cookie["expires"] == -1 else cookie["expires"],
        "http_only": cookie["httpOnly"],
        "secure": cookie["secure"],
        "same_site": cookie["sameSite"],
    }


STORAGE_TYPES = ["local_storage", "session_storage", "cache", "indexeddb", "service_workers"]
# The DevTools protocol's names for what Storage.clearDataForOrigin clears.
PROTOCOL_TYPES = {"local_storage": "local_storage", "cache": "cache_storage", "indexeddb": "indexeddb",
                  "service_workers": "service_workers"}  # fmt: skip


class ClearStorageParams(serializers.Serializer):
    origin = Url(required=False, help_text="The site (its scheme, host and port count); all sites when left out.")
    types = serializers.MultipleChoiceField(
        choices=STORAGE_TYPES,
        default={"local_storage", "session_storage", "cache"},
        allow_empty=False,
        error_messages={"empty": "name at least one type."},
    )

    def validate_types(self, value: set[str]) -> list[str]:
        return [name for name in STORAGE_TYPES if name in value]


@family.action("clear-storage", params=ClearStorageParams)
async def clear_storage(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Clear a site's storage (or every site's) from the persona's profile."""
    origin = origin_of(params["origin"]) if "origin" in params else None
    types = params["types"]
    session = await page.context.new_cdp_session(page)
    try:
        protocol_types = [PROTOCOL_TYPES[name] for name in types if name in PROTOCOL_TYPES]
        if protocol_types:
            # "*" is the protocol's every origin.
            await session.send("Storage.clearDataForOrigin", {"origin": origin or "*", "storageTypes": ",".join(protocol_types)})
        if "cache" in types:
            await session.send("Network.clearBrowserCache")  # Chromium's HTTP cache is cleared whole
    finally:
        await session.detach()
    cleared = [name for name in types if name != "session_storage"]
    if "session_storage" in types and (origin is None or origin_of(page.url) == origin):
        # Session storage belongs to a tab: this page's, for the site it shows.
        if await page.evaluate("() => { try { sessionStorage.clear(); return true; } catch (e) { return false; } }"):
            cleared.insert(types.index("session_storage"), "session_storage")
    return {"origin": origin, "cleared": cleared}


def origin_of(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        if url.startswith(("http:", "https:")):
            raise PluginError(400, f"{url[:200]!r} names no site.")
        return None
    default = {"http": 80, "https": 443}[parts.scheme]
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    return f"{parts.scheme}://{parts.hostname}{port}"
