"""A plugin family for the tests, loaded through PENELOPE_PLUGINS like any
user's family."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from playwright.async_api import Page
from rest_framework import serializers

from plugins.framework import Context, Family, PluginError

family = Family("testing")


class SleepParams(serializers.Serializer):
    seconds = serializers.FloatField(min_value=0, max_value=600)
    tag = serializers.CharField(required=False, default="")
    media_size = serializers.IntegerField(required=False, default=0, min_value=0, max_value=10_000_000)
    media_first = serializers.BooleanField(required=False, default=False)


@family.action("sleep", params=SleepParams)
async def sleep(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Hold the page for a while (a stand-in for a long plugin), then
    optionally store a file."""
    started = time.time()
    media = None
    if params["media_size"] and params["media_first"]:
        media = await ctx.put_media(bytes(params["media_size"]), content_type="application/octet-stream", filename="work.bin")
    await asyncio.sleep(params["seconds"])
    if params["media_size"] and not params["media_first"]:
        data = bytes(i % 251 for i in range(params["media_size"]))
        media = await ctx.put_media(data, content_type="application/octet-stream", filename="work.bin")
    result = {"tag": params["tag"], "started": started, "ended": time.time()}
    return {**result, "media": media} if media else result


class GateParams(serializers.Serializer):
    path = serializers.CharField()  # a file of the test's own, made when the gate opens


@family.action("gate", params=GateParams, timeout_s=600)
async def gate(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Hold the page until the test makes the file at `path`: a page that is
    let go when the test says, not after a guessed while."""
    gate_file = Path(params["path"])
    while not gate_file.exists():
        await asyncio.sleep(0.01)
    return {}


@family.action("crash")
async def crash(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    raise RuntimeError("the testing plugin crashed on purpose")


@family.action("refuse")
async def refuse(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    raise PluginError(418, "The testing plugin refuses.")


@family.action("overrun", timeout_s=0.3)
async def overrun(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await asyncio.sleep(30)
    return {}


@family.action("nan")
async def nan(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"value": float("nan")}


@family.action("close-tab")
async def close_tab(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await page.close()
    return {}


class MediaParams(serializers.Serializer):
    size = serializers.IntegerField(min_value=0, max_value=50_000_000)


@family.action("media", params=MediaParams)
async def media(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    data = bytes(i % 251 for i in range(params["size"]))
    return {"media": await ctx.put_media(data, content_type="application/octet-stream", filename="blob.bin")}


class ExportParams(serializers.Serializer):
    selector = serializers.CharField(max_length=200)
    timeout_ms = serializers.IntegerField(min_value=1, max_value=60_000, default=5_000)


@family.action("export", params=ExportParams)
async def export(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Click what starts a download and keep what it brings, as a family's own step would."""
    async with ctx.expect_download(page, timeout_ms=params["timeout_ms"]) as downloads:
        await page.click(params["selector"])
    return {"files": await downloads.store()}


class WaitParams(serializers.Serializer):
    ms = serializers.IntegerField(min_value=0, max_value=600_000)


@family.action("browser-wait", params=WaitParams)
async def browser_wait(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Wait inside the browser (a Playwright call in flight), as a plugin
    waiting for a slow page does."""
    await page.wait_for_timeout(params["ms"])
    return {"waited_ms": params["ms"]}


@family.action("stubborn")
async def stubborn(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A plugin that swallows its cancellation and goes on waiting in the
    browser, until its tab is closed under it."""
    while True:
        try:
            await page.wait_for_timeout(60_000)
        except asyncio.CancelledError:
            continue


class CountParams(serializers.Serializer):
    to = serializers.IntegerField(min_value=0, max_value=10_000_000)
    pause_s = serializers.FloatField(min_value=0, max_value=10, default=0)
    every = serializers.IntegerField(min_value=1, default=1)


@family.action("count", params=CountParams)
async def count(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Report progress from 1 to `to`, pausing `pause_s` every `every` reports."""
    for done in range(1, params["to"] + 1):
        ctx.progress(done=done, total=params["to"], message=f"counted {done}")
        if params["pause_s"] and done % params["every"] == 0:
            await asyncio.sleep(params["pause_s"])
    return {"counted": params["to"]}


class BlobParams(serializers.Serializer):
    size = serializers.IntegerField(min_value=0, max_value=10_000_000)


@family.action("blob", params=BlobParams)
async def blob(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A result of `size` characters: large job events."""
    return {"data": "x" * params["size"]}


class FlakyParams(serializers.Serializer):
    path = serializers.CharField()  # a file of the test's own: one line per attempt, kept across restarts
    failures = serializers.IntegerField(min_value=0, max_value=20)
    status = serializers.IntegerField(min_value=400, max_value=599, default=503)
    retry = serializers.BooleanField(allow_null=True, default=None)
    hold_first = serializers.BooleanField(default=False)


@family.action("flaky", params=FlakyParams)
async def flaky(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Fail the first `failures` attempts with `status` (and the plugin's own
    word on retrying, when given), then succeed; with `hold_first`, the first
    attempt holds the page until the worker stops under it."""
    with open(params["path"], "a+") as attempts:
        attempts.seek(0)
        attempt = len(attempts.readlines()) + 1
        attempts.write(f"{time.time()}\n")
    if attempt == 1 and params["hold_first"]:
        await asyncio.sleep(600)
    if attempt <= params["failures"]:
        raise PluginError(params["status"], f"Attempt {attempt} fails on purpose.", retry=params["retry"])
    return {"attempt": attempt}


class AskParams(serializers.Serializer):
    reason = serializers.CharField(default="Look at the page, then press Done.")
    wait_s = serializers.FloatField(min_value=0.1, max_value=3600, default=60)
    file = serializers.BooleanField(default=False)


@family.action("ask", params=AskParams, timeout_s=0.5)
async def ask(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Ask a person and answer what they said. Its own time limit (0.5 s) is
    shorter than any wait the tests give a person: only a paused limit lets
    it answer."""
    media = await ctx.put_media(b"stored before asking", content_type="text/plain", filename="a.txt") if params["file"] else None
    answer = await ctx.ask_human(reason=params["reason"], timeout_s=params["wait_s"])
    return {"answer": answer, "url": page.url, "media": media}


class VisitParams(serializers.Serializer):
    url = serializers.URLField()
    fail = serializers.BooleanField(required=False, default=True)


@family.action("visit", params=VisitParams)
async def visit(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Open a page, wait until it sets `data-done` on its body, then answer
    its title, or fail (502) as a flow that met something unexpected would."""
    await page.goto(params["url"], wait_until="domcontentloaded")
    await page.wait_for_function("document.body && document.body.dataset.done === '1'")
    title = await page.title()
    if params["fail"]:
        raise PluginError(502, f"The page {title} did not show what the flow expected.")
    return {"title": title}
