"""The worker's end of the driver tap (browser/tap.py) reads NUL-ended
messages whatever the reads cut them into, and the mux (cdp/mux.py) hears
every answer to what it sent, on a real Chromium; tests/test_cdp.py drives
real clients through it, and checks who may connect."""

from __future__ import annotations

import asyncio
import json
import os

from playwright.async_api import async_playwright

from browser.flags import clear_driver_tap, set_driver_options
from browser.tap import DriverTap, Link
from cdp.mux import Mux
from tests.support.faults import real_chromium

ROOT_ARGS = ["--no-sandbox"] if os.geteuid() == 0 else []


def test_a_link_hears_each_message_whole_however_the_reads_cut_them():
    link, heard = Link(), []
    link.on_message = heard.append
    link.data_received(b'{"id":1}\0{"id":2}\0{"id"')
    link.data_received(b':3,"x":"')
    link.data_received(("é" * 5).encode()[:3])
    link.data_received(("é" * 5).encode()[3:] + b'"}\0')
    link.data_received(b'{"id":4}\0')
    assert heard == ['{"id":1}', '{"id":2}', '{"id":3,"x":"ééééé"}', '{"id":4}']


class Recorder:
    """A bridge's place at the mux (cdp/mux.py's `Owner`): what it is told."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.ended: list[str] = []

    def from_target(self, session_id: str, message: str) -> None:
        self.heard.append(message)

    def detached(self, session_id: str) -> None:
        self.ended.append(session_id)

    def target_news(self, method: str, params: dict) -> None:
        pass

    def browser_gone(self) -> None:
        pass


def test_a_message_to_a_session_chromium_ended_is_answered_to_its_sender_and_playwright_is_untouched():
    """Chromium answers a message for a session it no longer has at the
    root, without the session's id. The mux's own negative ids bring that
    answer back to the worker, and the client gets it with its own id; it
    never reaches Playwright, whose calls in flight have ids of their own."""

    executable = real_chromium()

    async def run() -> tuple[Recorder, str, int]:
        tap = DriverTap()
        set_driver_options(await tap.open())
        try:
            async with async_playwright() as playwright:
                clear_driver_tap()
                browser = await playwright.chromium.launch(executable_path=executable, args=ROOT_ARGS)
                page = await browser.new_page()
                session = await page.context.new_cdp_session(page)
                target = (await session.send("Target.getTargetInfo"))["targetInfo"]["targetId"]
                mux = await Mux.open(browser.contexts[0], await tap.link(10))
                owner = Recorder()
                attached = await mux.attach(target, owner)
                answered = asyncio.Event()
                owner.from_target = lambda session_id, message: (owner.heard.append(message), answered.set())
                # Chromium ends the session; the mux sends into it before it hears so.
                await mux.call("Target.detachFromTarget", {"sessionId": attached})
                mux.owners[attached] = owner  # as when the end is still on its way
                assert mux.post(attached, 7, "Runtime.evaluate", {"expression": "1+1"})
                await asyncio.wait_for(answered.wait(), 10)
                value = await page.evaluate("6 * 7")
                await browser.close()
                return owner, attached, value
        finally:
            await tap.close()

    owner, attached, value = asyncio.run(run())
    answer = json.loads(owner.heard[-1])
    assert answer["id"] == 7 and answer["sessionId"] == attached and answer["error"]["code"] == -32001, answer
    assert value == 42
