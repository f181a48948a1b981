"""`web/collect`: gather a list's items the way a user sees them, scrolling
for more and, when asked, turning to the next page."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from rest_framework import serializers

from core.api import first_line
from core.shapes import Flag, Text
from plugins.framework import Context
from plugins.web import network
from plugins.web.base import SELECTOR, ReadParams, action, wait_for

PAGE_MARK = "{page}"


class Field(serializers.Serializer):
    selector = Text(max_length=1000, required=False, help_text="CSS inside the item; the item itself when left out.")
    attribute = Text(max_length=200, required=False, help_text="Read this attribute instead of the text.")


class NextPage(serializers.Serializer):
    selector = Text(max_length=1000, required=False, help_text="A link or button to click for the next page; not with url.")
    url = Text(
        max_length=4096,
        required=False,
        pattern="[^\\u0000]*\\{page\\}[^\\u0000]*",
        help_text=(
            "A URL with {page} in it: pages 2, 3, … are opened in turn. Not with selector; with {page} as 2 "
            "it must be a URL that `url` of web/open takes."
        ),
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("selector" in data) == ("url" in data):
            raise serializers.ValidationError("give either selector or url.")
        if "url" in data:
            if PAGE_MARK not in data["url"]:
                raise serializers.ValidationError("url must hold {page}, where the page number goes.")
            serializers.URLField().run_validation(data["url"].replace(PAGE_MARK, "2"))
        return data


MAX_FIELDS = 50


class FieldMap(serializers.DictField):
    """`fields`: at least one, at most MAX_FIELDS (the serializer checks it)."""

    child = Field()
    max_properties = MAX_FIELDS


class CollectParams(ReadParams, network.CaptureParams):
    item_selector = SELECTOR
    attribute = Text(max_length=200, required=False, help_text="Not with fields.")
    fields = FieldMap(required=False, allow_empty=False, help_text="Not with attribute.")
    raw_urls = Flag(required=False)
    dedupe = Flag(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100_000, default=100)
    max_seconds = serializers.FloatField(min_value=0.1, max_value=3600, default=60)
    scroll_pause_ms = serializers.IntegerField(min_value=0, max_value=60_000, default=500)
    next = NextPage(required=False)
    max_pages = serializers.IntegerField(
        min_value=1, max_value=1000, required=False, help_text="Only with next (else 400); 10 when next is given."
    )
    timeout_ms = serializers.IntegerField(min_value=1, max_value=600_000, default=30_000)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if "fields" in data and "attribute" in data:
            raise serializers.ValidationError("give fields or attribute, not both.")
        if "fields" in data and len(data["fields"]) > MAX_FIELDS:
            raise serializers.ValidationError(f"at most {MAX_FIELDS} fields.")
        if "max_pages" in data and "next" not in data:
            raise serializers.ValidationError("max_pages goes with next.")
        # The plain form answers as it always has: distinct values, links as written.
        data.setdefault("dedupe", "fields" not in data)
        data.setdefault("raw_urls", "fields" not in data)
        data.setdefault("max_pages", 10 if "next" in data else 1)
        return data


# Reads, in one round trip, the matching items that are new or changed since
# this call last read them: each element's last value is remembered (a
# WeakMap under the call's token), so a scroll reads what it brought, and a
# list that reuses its elements for new content (in-place pages, virtual
# lists) is read again where the content changed. An item with nothing to
# read is left for later: its content may still be loading.
READ_ITEMS_JS = """([token, selector, attribute, fields, absolute]) => {
  if (!window.__penelopeSeen || window.__penelopeSeen.token !== token)
    window.__penelopeSeen = {token, values: new WeakMap()};
  const seen = window.__penelopeSeen.values;
  const url = (value) => { try { return new URL(value, document.baseURI).href; } catch (e) { return value; } };
  const read = (el, attr) => {
    if (!attr) return (el.innerText || "").trim();
    const value = (el.getAttribute(attr) || "").trim();
    return absolute && value && (attr === "href" || attr === "src") ? url(value) : value;
  };
  const items = [];
  for (const el of document.querySelectorAll(selector)) {
    let item;
    if (fields) {
      item = {};
      let any = false;
      for (const [name, field] of Object.entries(fields)) {
        const target = field.selector ? el.querySelector(field.selector) : el;
        item[name] = target ? read(target, field.attribute) : null;
        any = any || Boolean(item[name]);
      }
      if (!any) continue;
    } else {
      item = read(el, attribute);
      if (!item) continue;
    }
    const key = fields ? JSON.stringify(item) : item;
    if (seen.get(el) === key) continue;
    seen.set(el, key);
    items.push(item);
  }
  return items;
}"""

# Before a click on "next": remember the list's first and last items and its
# length, so the turn is seen when any of them changes (a new page, rows
# rewritten in place, or rows added below by a "load more" button).
LIST_MARK_JS = """(selector) => { const all = document.querySelectorAll(selector);
  const first = all[0] || null, last = all[all.length - 1] || null;
  return {first, last, count: all.length, firstText: first && first.innerText, lastText: last && last.innerText}; }"""
MARK_TURN_JS = f"(selector) => {{ window.__penelopeTurn = ({LIST_MARK_JS})(selector); }}"
TURNED_JS = f"""(selector) => {{ const mark = window.__penelopeTurn;
  if (!mark) return true;  // a new document
  const now = ({LIST_MARK_JS})(selector);
  return Object.keys(mark).some(name => now[name] !== mark[name]); }}"""
# A next link or button that is missing, disabled or hidden means this is the last page.
NEXT_USABLE_JS = """(el) => !(el.disabled || el.getAttribute("aria-disabled") === "true"
  || el.classList.contains("disabled") || el.getClientRects().length === 0)"""


def collect_time_limit(params: dict[str, Any]) -> float:
    return params["max_seconds"] + 30 + (params["timeout_ms"] / 1000 if "next" in params else 0)


@action("collect", params=CollectParams, timeout_s=collect_time_limit)
async def collect(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Scroll like a user and gather items until the limit, the end of the list
    (a scroll that loads nothing new, on the last page) or the time budget."""
    run = Collection(page, params, ctx)
    async with network.capture(page, params, ctx) as captured:
        await run.all_pages()
    return {**run.answer(), **captured.answer()}


class Collection:
    """One collect call: its items so far and why it stopped."""

    def __init__(self, page: Page, params: dict[str, Any], ctx: Context) -> None:
        self.page, self.params, self.ctx = page, params, ctx
        self.limit = params["limit"]
        self.deadline = time.monotonic() + params["max_seconds"]
        self.items: list[Any] = []
        self.keys: set[str] = set()
        self.pages = 0
        self.stopped_because = "time"
        self.next_error: str | None = None
        self.token = secrets.token_hex(8)

    def answer(self) -> dict[str, Any]:
        items = self.items[: self.limit]
        answer = {"items": items, "count": len(items), "stopped_because": self.stopped_because, "pages": self.pages}
        if self.next_error:
            answer["next_error"] = self.next_error
        return answer

    async def all_pages(self) -> None:
        while True:
            self.pages += 1
            await wait_for(self.page, self.params.get("wait_for"))
            before = len(self.items)
            if not await self.one_page():
                return
            if self.pages > 1 and len(self.items) == before:
                return  # a page turned to holds no items: past the last one ("end")
            if self.pages >= self.params["max_pages"]:
                self.stopped_because = "max_pages" if "next" in self.params else "end"
                return
            if time.monotonic() >= self.deadline:
                self.stopped_because = "time"
                return
            try:
                turned = await self.turn_page()
            except PlaywrightError as error:
                if self.page.is_closed():
                    raise
                # The items so far are kept: the answer says why it stopped here.
                self.stopped_because = "next_failed"
                self.next_error = next_failure(self.params["next"], self.params["timeout_ms"], error)
                return
            if not turned:
                return

    async def one_page(self) -> bool:
        """Read and scroll this page to its end; False when the whole call is done."""
        fields, scrolls = self.params.get("fields"), 0
        while True:
            found = await self.page.evaluate(
                READ_ITEMS_JS,
                [self.token, self.params["item_selector"], self.params.get("attribute"), fields, not self.params["raw_urls"]],
            )
            added = self.add(found)
            self.ctx.progress(
                done=min(len(self.items), self.limit),
                total=self.limit,
                message=f"{len(self.items)} items, page {self.pages}, {scrolls} scrolls",
            )
            if len(self.items) >= self.limit:
                self.stopped_because = "limit"
                return False
            if time.monotonic() >= self.deadline:
                self.stopped_because = "time"
                return False
            at_bottom_before = await _scroll_to_bottom(self.page)
            scrolls += 1
            await self.page.wait_for_timeout(self.params["scroll_pause_ms"])
            if not added and at_bottom_before and await _at_bottom(self.page):
                self.stopped_because = "end"
                return True

    def add(self, found: list[Any]) -> int:
        if not self.params["dedupe"]:
            self.items.extend(found)
            return len(found)
        added = 0
        for item in found:
            key = item if isinstance(item, str) else json.dumps(item, sort_keys=True)
            if key not in self.keys:
                self.keys.add(key)
                self.items.append(item)
                added += 1
        return added

    async def turn_page(self) -> bool:
        """Go to the next page; False when there is none (the call ends cleanly)."""
        turn = self.params["next"]
        timeout = self.params["timeout_ms"]
        if "url" in turn:
            url = turn["url"].replace(PAGE_MARK, str(self.pages + 1))
            response = await self.page.goto(url, timeout=timeout)
            if response is not None and response.status >= 400:
                self.stopped_because = "end"  # past the last page
                return False
            return True
        button = self.page.locator(turn["selector"])
        if await button.count() == 0 or not await button.first.evaluate(NEXT_USABLE_JS):
            self.stopped_because = "end"
            return False
        selector = self.params["item_selector"]
        await self.page.evaluate(MARK_TURN_JS, selector)
        await button.first.click(timeout=timeout)
        await _wait_for_turn(self.page, selector, timeout)
        return True


def next_failure(turn: dict[str, Any], timeout_ms: int, error: PlaywrightError) -> str:
    if "selector" in turn and isinstance(error, PlaywrightTimeoutError):
        return f"Clicked {turn['selector']!r} for the next page; the items did not change within {timeout_ms} ms."
    return f"Turning to the next page failed: {first_line(error.message)}"


async def _wait_for_turn(page: Page, selector: str, timeout_ms: int) -> None:
    """Wait until the list shows other items than before the click, in this
    document or in a new one the click navigated to."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            await page.wait_for_function(TURNED_JS, arg=selector, timeout=max(1, (deadline - time.monotonic()) * 1000))
            break
        except PlaywrightTimeoutError:
            raise
        except PlaywrightError as error:
            # The click's navigation destroyed the context the wait ran in: wait in the new one.
            if "context was destroyed" not in (error.message or "") or time.monotonic() >= deadline:
                raise
    await page.wait_for_load_state("domcontentloaded", timeout=max(1, (deadline - time.monotonic()) * 1000))


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
