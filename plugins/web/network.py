"""Capturing what a page fetches while an action runs: matching responses'
URL, status, type and body come back in the answer (most sites' data
arrives as JSON from XHR or fetch, not in the HTML)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Response
from rest_framework import serializers

from core.shapes import Text
from plugins.framework import Context

log = logging.getLogger("penelope.plugins")

BODY_READ_S = 10  # a body still streaming after the action ends gets this long
TEXT_TYPES = re.compile(r"^(text/|application/(json|[\w.+-]+\+json|javascript|xml|[\w.+-]+\+xml|x-www-form-urlencoded))")
JSON_TYPES = re.compile(r"^application/(json|[\w.+-]+\+json)")


class UrlGlob(Text):
    def to_internal_value(self, data: Any) -> str:
        glob = super().to_internal_value(data)
        try:
            glob_pattern(glob)
        except ValueError as error:
            raise serializers.ValidationError(f"{glob[:100]!r} is not a URL glob: {error}.") from None
        return glob


class CaptureParams(serializers.Serializer):
    capture = serializers.ListField(child=UrlGlob(max_length=2000), min_length=1, max_length=20, required=False)
    capture_limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)
    capture_inline_bytes = serializers.IntegerField(min_value=0, max_value=10_000_000, default=1_000_000)
    capture_inline_total = serializers.IntegerField(
        min_value=0, max_value=32 * 1024 * 1024, default=8 * 1024 * 1024,
        help_text="Bytes of bodies answered inline in one call, all together; the rest are stored as files.",
    )


def glob_pattern(glob: str) -> re.Pattern[str]:
    """A URL glob as a regex, read as Playwright reads its URL globs: `**` is
    any text (and `**/` any number of path segments, none included), `*` any
    text without `/`, `{a,b}` either, `\\` makes the next character plain;
    everything else (`?` and `.` included) stands for itself."""
    out, at, in_group = [], 0, False
    while at < len(glob):
        char = glob[at]
        if char == "\\" and at + 1 < len(glob):
            out.append(re.escape(glob[at + 1]))
            at += 2
            continue
        if glob.startswith("**/", at):
            out.append("(?:.*/)?")
            at += 3
            continue
        if glob.startswith("**", at):
            out.append(".*")
            at += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "{" and not in_group:
            out.append("(?:")
            in_group = True
        elif char == "}" and in_group:
            out.append(")")
            in_group = False
        elif char == "," and in_group:
            out.append("|")
        else:
            out.append(re.escape(char))
        at += 1
    if in_group:
        raise ValueError("a { is not closed")
    return re.compile("".join(out))


@dataclass
class Captured:
    """The responses one action captured, in the order they arrived."""

    patterns: list[re.Pattern[str]]
    limit: int
    inline_bytes: int
    inline_total: int
    ctx: Context
    reads: list[tuple[str, asyncio.Task]] = field(default_factory=list)
    dropped: int = 0
    entries: list[dict[str, Any]] = field(default_factory=list)
    inline_used: int = 0  # bytes answered inline so far, against inline_total

    def on_response(self, response: Response) -> None:
        if not any(pattern.fullmatch(response.url) for pattern in self.patterns):
            return
        if len(self.reads) >= self.limit:
            self.dropped += 1
            return
        # The body is read at once: after a navigation the browser may drop it.
        self.reads.append((response.url, asyncio.ensure_future(self.read(response))))

    async def read(self, response: Response) -> dict[str, Any]:
        content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        entry: dict[str, Any] = {
            "url": response.url,
            "method": response.request.method,
            "status": response.status,
            "content_type": content_type or None,
        }
        try:
            body = await response.body()
        except PlaywrightError as error:  # a redirect, or a body the browser no longer holds
            return {**entry, "error": f"the body is not available: {error.message.splitlines()[0][:200]}"}
        entry["size"] = len(body)
        inline = len(body) <= self.inline_bytes and self.inline_used + len(body) <= self.inline_total
        if inline and TEXT_TYPES.match(content_type or "text/"):
            self.inline_used += len(body)  # no await since the check: reads running beside it see it
            text = body.decode("utf-8", errors="replace")
            if JSON_TYPES.match(content_type):
                with contextlib.suppress(ValueError):
                    parsed = json.loads(text)
                    json.dumps(parsed, allow_nan=False)  # NaN is not strict JSON: kept as text
                    return {**entry, "json": parsed}
            return {**entry, "text": text}
        filename = response.url.rstrip("/").rsplit("/", 1)[-1].split("?")[0][:100] or "response"
        media = await self.ctx.put_media(body, content_type=content_type or "application/octet-stream", filename=filename)
        return {**entry, "media": media}

    def abandon(self) -> None:
        """The action failed or was cancelled: its bodies are not waited for."""
        for _, task in self.reads:
            task.cancel()

    async def finish(self) -> None:
        if not self.reads:
            return
        done, pending = await asyncio.wait([task for _, task in self.reads], timeout=BODY_READ_S)
        for task in pending:
            task.cancel()
        for url, task in self.reads:
            if task not in done:
                self.entries.append({"url": url, "error": f"the body did not arrive within {BODY_READ_S} s"})
            elif task.exception() is not None:
                log.warning("capturing %s failed: %r", url, task.exception())
                self.entries.append({"url": url, "error": f"the body could not be read: {task.exception()}"})
            else:
                self.entries.append(task.result())

    def answer(self) -> dict[str, Any]:
        return {"captured": self.entries, "captured_dropped": self.dropped}


class NoCapture:
    def answer(self) -> dict[str, Any]:
        return {}


@contextlib.asynccontextmanager
async def capture(page: Page, params: dict[str, Any], ctx: Context) -> AsyncIterator[Captured | NoCapture]:
    """Capture the responses whose URL matches one of `capture`'s globs while
    the block runs; the answer is ready once the block has ended."""
    if not params.get("capture"):
        yield NoCapture()
        return
    captured = Captured(
        [glob_pattern(glob) for glob in params["capture"]],
        params["capture_limit"],
        params["capture_inline_bytes"],
        params["capture_inline_total"],
        ctx,
    )
    page.on("response", captured.on_response)
    try:
        yield captured
    except BaseException:
        captured.abandon()
        raise
    else:
        await captured.finish()
    finally:
        page.remove_listener("response", captured.on_response)
