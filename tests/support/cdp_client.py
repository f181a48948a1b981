"""A CDP client for the CDP tests: the raw one (a WebSocket and JSON, for
the worker's own rules), and a Playwright script run in a process of its own
(`python -m tests.support.cdp_client URL [SITE]`), as a user's script runs.

The script connects with `connect_over_cdp`, drives the leased page on the
test site (navigate, fill, click, a screenshot, `route` interception, the
console and request events), opens a tab of its own, and prints what it saw
as one JSON line; without SITE, it opens Playwright's raw CDP sessions and
closes the leased page."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from websockets.sync.client import connect


class RawCdp:
    """One CDP connection, message by message."""

    def __init__(self, url: str) -> None:
        self.connecting = connect(url, max_size=None, open_timeout=10)
        self.socket = self.connecting.__enter__()
        self.ids = iter(range(1, 1_000_000))
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict | None = None, session: object = None, timeout: float = 15) -> dict:
        """The answer to one message: {"result": ...} or {"error": ...}; events met meanwhile are kept."""
        call_id = next(self.ids)
        message = {"id": call_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            got = json.loads(self.socket.recv(timeout=timeout))
            if got.get("id") == call_id:
                return got
            self.events.append(got)

    def result(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        answer = self.call(method, params, session)
        assert "result" in answer, answer
        return answer["result"]

    def page_session(self) -> str:
        """Attach to the client's one page as Playwright does: its session id."""
        self.result("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True})
        attached = [event for event in self.events if event.get("method") == "Target.attachedToTarget"]
        assert len(attached) == 1, attached
        return attached[0]["params"]["sessionId"]

    def close(self) -> None:
        self.connecting.__exit__(None, None, None)

    def __enter__(self) -> RawCdp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def drive(url: str, site: str) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect_over_cdp(url)
        context = browser.contexts[0]
        seen: dict[str, Any] = {"contexts": len(browser.contexts), "pages": len(context.pages)}
        page = context.pages[0]
        console: list[str] = []
        requests: list[str] = []
        page.on("console", lambda message: console.append(message.text))
        page.on("request", lambda request: requests.append(request.url))
        seen["sum"] = await page.evaluate("1 + 1")
        await page.goto(f"{site}/list?page=1&pages=2")
        await page.set_content('<input id="name"><button id="go" onclick="document.title = document.getElementById(\'name\').value">go</button>')
        await page.fill("#name", "typed by a script")
        await page.click("#go")
        seen["title"] = await page.title()
        seen["screenshot_bytes"] = len(await page.screenshot())
        await page.route("**/api/items*", lambda route: route.fulfill(json={"items": "answered by the script"}))
        seen["routed"] = await page.evaluate(f"fetch('{site}/api/items?count=2').then(r => r.json())")
        await page.evaluate("console.log('said by the page')")
        seen["console"] = console
        seen["requests"] = [request for request in requests if request.startswith(site)]
        tab = await context.new_page()
        seen["own_tab_pages"] = len(context.pages)
        await tab.goto(f"{site}/list?page=2&pages=2")
        await page.goto(f"{site}/list?page=1&pages=3")
        seen["url"] = page.url
        await browser.close()  # a CDP client's close: it disconnects
    return seen




async def own_sessions(url: str) -> dict[str, Any]:
    """Playwright's raw CDP sessions, and its close of the leased page."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect_over_cdp(url)
        page = browser.contexts[0].pages[0]
        session = await browser.contexts[0].new_cdp_session(page)
        seen = {"evaluated": (await session.send("Runtime.evaluate", {"expression": "40 + 2"}))["result"]["value"]}
        browser_session = await browser.new_browser_cdp_session()
        seen["targets"] = [t["type"] for t in (await browser_session.send("Target.getTargets"))["targetInfos"]]
        await page.close()  # the worker's page: the script is let go of it, the page stays
        seen["closed"] = page.is_closed()
        await browser.close()
    return seen


if __name__ == "__main__":
    scenario = drive(sys.argv[1], sys.argv[2]) if len(sys.argv) > 2 else own_sessions(sys.argv[1])
    print(json.dumps(asyncio.run(scenario)), flush=True)
