"""A page's refresh that is a redirect: `web/open` follows it, as it follows a 3xx.

A document may ask to be replaced once it has loaded: `<meta
http-equiv="refresh" content="0;url=...">`, or a `Refresh` header. Chromium
starts that navigation after the load event, so `goto` had answered by
then: `web/open` answered `200` for the first document, and when the egress
guard (BROWSER_REFUSE_PRIVATE) refused the refresh a moment later, nobody
was told (the next call on the page forgets a refusal from before it).

A refresh due within REDIRECT_S of the load is a redirect, as Chromium
counts it (it replaces the history entry, as a 3xx does), so `web/open`
waits for its navigation, within what is left of its `timeout_ms`: the
answer is then the page it led to, and a refusal of the guard is known to
the call, which answers `403` naming the address, as for a refused
redirect hop (plugins/running.py). So is a navigation of the main frame
the page itself began by the time the open looks (a script's, right at
the load): the document it was about to answer is already going. A later
refresh is the page's own doing, after the answer, like a later script's
navigation.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, Page, Request, Response

# Chromium takes a refresh of at most 1 s for a redirect.
REDIRECT_S = 1.0
# The first `<meta http-equiv="refresh">` of the document, as the browser reads it.
META_REFRESH = """() => {
  const meta = document.querySelector('meta[http-equiv="refresh" i][content]');
  return meta ? meta.getAttribute('content') : null;
}"""
# HTML's "shared declarative refresh steps": the seconds, then (after `;` or
# `,`) an optional `url=` and the URL, maybe quoted.
SPACE = "[\\t\\n\\f\\r ]"
REFRESH = re.compile(
    f"{SPACE}*([0-9]+)[0-9.]*{SPACE}*(?:[;,]{SPACE}*(?:[uU][rR][lL]{SPACE}*={SPACE}*)?(.*))?", re.DOTALL
)


def refresh_target(declared: str | None, base: str) -> tuple[float, str] | None:
    """A refresh's delay and absolute URL, or None when `declared` is none."""
    if not declared:
        return None
    found = REFRESH.fullmatch(declared)
    if found is None:
        return None
    seconds, url = found.groups()
    url = (url or "").strip()
    if url[:1] in ("'", '"'):
        url = url[1:].split(url[0], 1)[0]
    return float(seconds), (urljoin(base, url) if url else base)


class Navigations:
    """The main frame's navigations, as their events arrive, in order: each
    navigation request, its response, each commit and each load state.

    Recorded by the handlers as Playwright dispatches the events, so "after
    the open's own request" is exact: `goto` answers once its load event is
    dispatched, and the refresh's events, which Chromium starts after that,
    may be dispatched before the open's code runs again."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.events: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()
        self._handlers = {
            "request": lambda request: self._navigation("request", request),
            "response": lambda response: self._navigation("response", response),
            "requestfailed": lambda request: self._navigation("requestfailed", request),
            "framenavigated": lambda frame: self._frame("commit", frame),
            "domcontentloaded": lambda _page: self._add("domcontentloaded", None),
            "load": lambda _page: self._add("load", None),
        }
        for event, handler in self._handlers.items():
            page.on(event, handler)

    def close(self) -> None:
        for event, handler in self._handlers.items():
            page_remove(self.page, event, handler)

    def _add(self, kind: str, item: Any) -> None:
        self.events.append((kind, item))
        self.changed.set()

    def _navigation(self, kind: str, item: Request | Response) -> None:
        request = item.request if isinstance(item, Response) else item
        try:
            ours = request.is_navigation_request() and request.frame == self.page.main_frame
        except PlaywrightError:  # a service worker's request has no frame
            ours = False
        if ours:
            self._add(kind, item)

    def _frame(self, kind: str, frame: Frame) -> None:
        if frame == self.page.main_frame:
            self._add(kind, frame.url)

    def start_of(self, response: Response | None) -> int:
        """The index of the event after which a navigation is a new one: the
        open's own request (its last hop), else every event so far."""
        if response is not None:
            for index in range(len(self.events) - 1, -1, -1):
                if self.events[index] == ("request", response.request):
                    return index + 1
        return len(self.events)

    def settled(self, start: int, wait_until: str) -> tuple[bool, Response | None]:
        """Whether a navigation begun after `start` has committed and reached
        `wait_until` (`networkidle` is taken as `load`); and its response."""
        begun = committed = False
        response: Response | None = None
        for kind, item in self.events[start:]:
            if kind == "request":
                begun, committed, response = True, False, None
            elif kind == "response" and begun:
                response = item
            elif kind == "commit" and begun:
                committed = True
                if wait_until == "commit":
                    return True, response
            elif committed and kind == ("domcontentloaded" if wait_until == "domcontentloaded" else "load"):
                return True, response
        return False, response

    async def wait_settled(self, start: int, wait_until: str, timeout_s: float) -> tuple[bool, Response | None]:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            self.changed.clear()
            done, response = self.settled(start, wait_until)
            left = deadline - asyncio.get_running_loop().time()
            if done or left <= 0:
                return done, response
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                pass


def page_remove(page: Page, event: str, handler: Callable[[Any], None]) -> None:
    with contextlib.suppress(ValueError, KeyError):  # never added, or already gone
        page.remove_listener(event, handler)


async def follow_refresh(
    page: Page, navigations: Navigations, response: Response | None, *, wait_until: str, timeout_ms: float
) -> tuple[bool, Response | None]:
    """After `goto` answered `response`: wait, up to `timeout_ms`, for the
    navigation of a refresh due within REDIRECT_S of the load (the
    document's own, or its Refresh header's; to another URL), or of one
    that has already taken the page on. Answers whether one settled, and
    its response (None for none: a refused tunnel, Chromium's error page)."""
    start = navigations.start_of(response)
    before = page.url
    try:
        declared = await page.evaluate(META_REFRESH)
    except PlaywrightError:  # the document went while it was read: the page moved on
        declared = None
    moved = any(kind == "request" for kind, _ in navigations.events[start:])
    if not moved:
        if declared is None and response is not None:
            declared = response.headers.get("refresh")
        refresh = refresh_target(declared, before)
        if refresh is None or refresh[0] > REDIRECT_S or refresh[1] == before:
            return False, None  # no refresh, a later one, or a reload of the same page
    return await navigations.wait_settled(start, wait_until, max(0.0, timeout_ms / 1000))
