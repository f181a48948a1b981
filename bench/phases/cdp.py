"""A CDP step through the worker against the same step made directly on the
same Chromium: `page.evaluate("1+1")` from Playwright's `connect_over_cdp`,
and a bare `Runtime.evaluate` over a WebSocket, each through
`/cdp/<token>` and straight to the browser.

The worker never opens a debugging port (cdp/mux.py); for the direct
reference, this phase starts its worker with PENELOPE_BROWSER pointing at a
wrapper that adds one to the same Chromium, so both paths reach the same
browser, the same page and the same renderer."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import httpx
from playwright.async_api import async_playwright
from websockets.sync.client import connect

from bench.report import Plan, Report, Row, ms
from browser.flags import clear_driver_tap, set_driver_options
from browser.launch import SYSTEM_CHROMIUM_NAMES
from browser.tap import DriverTap
from harness.worker import WorkerProcess, free_port

TARGET_EXTRA_MS = 0.5
MARK = "bench-cdp"  # the leased page's title, how the direct path finds it


def chromium() -> str:
    """Playwright's own Chromium where it is installed, else the system's (as the worker picks)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        own = playwright.chromium.executable_path
    if own and os.access(own, os.X_OK):
        return own
    return next(found for name in SYSTEM_CHROMIUM_NAMES if (found := shutil.which(name)))


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def mark(url: str) -> None:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect_over_cdp(url)
        await browser.contexts[0].pages[0].evaluate(f"document.title = '{MARK}'")
        await browser.close()


async def playwright_steps(url: str, count: int) -> list[float]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect_over_cdp(url)
        pages = [page for context in browser.contexts for page in context.pages]
        page = next(
            page for page, title in zip(pages, [await page.title() for page in pages], strict=True) if title == MARK
        )
        for _ in range(count // 5):
            await page.evaluate("1+1")
        samples = []
        for _ in range(count):
            began = time.perf_counter()
            await page.evaluate("1+1")
            samples.append(time.perf_counter() - began)
        await browser.close()
    return samples


def bare_steps(url: str, target_id: str, count: int) -> list[float]:
    """`Runtime.evaluate` on a flat session, message by message: no client library's own cost."""
    with connect(url, max_size=None) as socket:

        def call(call_id: int, method: str, params: dict, session: str | None = None) -> dict:
            socket.send(
                json.dumps(
                    {"id": call_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
                )
            )
            while True:
                message = json.loads(socket.recv())
                if message.get("id") == call_id:
                    return message

        session = call(1, "Target.attachToTarget", {"targetId": target_id, "flatten": True})["result"]["sessionId"]
        samples = []
        for number in range(count + count // 5):
            began = time.perf_counter()
            answer = call(10 + number, "Runtime.evaluate", {"expression": "1+1"}, session)
            assert answer["result"]["result"]["value"] == 2
            if number >= count // 5:
                samples.append(time.perf_counter() - began)
    return samples


async def pipe_steps(executable: str, port: int, count: int) -> tuple[list[float], list[float], list[float]]:
    """The hops under a client's socket, on a Chromium of this process's own
    launched as the worker's is (Playwright over its pipe, the driver tap
    loaded), with a port beside it for the direct reference: a
    `Runtime.evaluate` through the tap, as the mux sends a client's, and the
    same through Playwright's driver protocol, as it sent them before."""
    tap = DriverTap()
    set_driver_options(await tap.open())
    try:
        async with async_playwright() as playwright:
            clear_driver_tap()
            browser = await playwright.chromium.launch(
                executable_path=executable, args=["--no-sandbox", f"--remote-debugging-port={port}"]
            )
            page = await browser.new_page()
            await page.evaluate(f"document.title = '{MARK}'")
            target = next(t["id"] for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["title"] == MARK)
            tapped = await tap_steps(await tap.link(10), target, count)
            session = await page.context.new_cdp_session(page)
            piped = []
            for number in range(count + count // 5):
                began = time.perf_counter()
                await session.send("Runtime.evaluate", {"expression": "1+1"})
                if number >= count // 5:
                    piped.append(time.perf_counter() - began)
            direct = httpx.get(f"http://127.0.0.1:{port}/json/version").json()["webSocketDebuggerUrl"]
            straight = await asyncio.to_thread(bare_steps, direct, target, count)
            await browser.close()
    finally:
        clear_driver_tap()
        await tap.close()
    return tapped, piped, straight


async def tap_steps(link, target: str, count: int) -> list[float]:
    """Message by message through the tap's link: a browser session, a flat
    session on the page, then the steps."""
    answers: dict[int, asyncio.Future] = {}

    def heard(text: str) -> None:
        message = json.loads(text)
        if message.get("id") in answers:
            answers.pop(message["id"]).set_result(message)

    link.on_message = heard

    async def call(call_id: int, method: str, params: dict, session: str | None = None) -> dict:
        answers[call_id] = asyncio.get_running_loop().create_future()
        link.send(
            json.dumps(
                {"id": call_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
            )
        )
        return await answers[call_id]

    browser = (await call(-1, "Target.attachToBrowserTarget", {}))["result"]["sessionId"]
    session = (await call(1, "Target.attachToTarget", {"targetId": target, "flatten": True}, browser))["result"][
        "sessionId"
    ]
    samples = []
    for number in range(count + count // 5):
        began = time.perf_counter()
        answer = await call(10 + number, "Runtime.evaluate", {"expression": "1+1"}, session)
        assert answer["result"]["result"]["value"] == 2
        if number >= count // 5:
            samples.append(time.perf_counter() - began)
    return samples


def cdp_phase(plan: Plan, report: Report, scratch: Path) -> None:
    count = 200 if plan.name == "quick" else 1000
    port = free_port()
    wrapper = scratch / "chromium-with-a-port"
    wrapper.write_text(f'#!/bin/sh\nexec {chromium()} --remote-debugging-port={port} "$@"\n')
    wrapper.chmod(0o755)
    worker = WorkerProcess(
        scratch / "cdp-store", env={"PENELOPE_PLUGINS": "plugins.web", "PENELOPE_BROWSER": str(wrapper)}
    )
    try:
        worker.start()
        with worker.client() as client:
            lease = client.post("/main/lease", json={"ttl": 600}).json()["lease"]

            def token() -> str:
                made = client.post("/main/cdp", json={"ttl": 300}, headers={"X-Lease": lease})
                made.raise_for_status()
                return worker.base_url.replace("http://", "ws://") + made.json()["url"]

            asyncio.run(mark(token()))
            direct = httpx.get(f"http://127.0.0.1:{port}/json/version").json()["webSocketDebuggerUrl"]
            target = next(t["id"] for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["title"] == MARK)
            rows = []
            for name, through, straight in (
                (
                    'Playwright\'s `page.evaluate("1+1")` over `connect_over_cdp`',
                    asyncio.run(playwright_steps(token(), count)),
                    asyncio.run(playwright_steps(direct, count)),
                ),
                (
                    "A bare `Runtime.evaluate` on a flat session (one WebSocket, no client library)",
                    bare_steps(token(), target, count),
                    bare_steps(direct, target, count),
                ),
            ):
                rows.append((name, p50_ms(through), p50_ms(straight)))
    finally:
        worker.stop()
    tapped, piped, straight = asyncio.run(pipe_steps(chromium(), free_port(), count))
    for name, samples in (
        (
            "The floor under it: a `Runtime.evaluate` from Python through the driver tap (browser/tap.py), as the mux sends a client's "
            "(no client, no socket)",
            tapped,
        ),
        (
            "The same through Playwright's driver protocol (a CDP session's `send`), as the mux sent them before the tap",
            piped,
        ),
    ):
        report.add(
            Row(
                f"{name}, p50 of {count}",
                ms(p50_ms(samples)),
                f"straight to the same Chromium: {ms(p50_ms(straight))}",
                f"+{p50_ms(samples) - p50_ms(straight):.3f} ms",
            )
        )
    for name, through, straight in rows:
        extra = through - straight
        report.add(
            Row(
                f"{name}, through `/cdp/<token>`, p50 of {count}",
                ms(through),
                f"straight to the same Chromium: {ms(straight)}",
                f"+{extra:.3f} ms",
                f"at most +{TARGET_EXTRA_MS} ms",
                extra <= TARGET_EXTRA_MS,
            )
        )
